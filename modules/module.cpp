#include "microtorch/nn/module.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <typeinfo>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "microtorch/autograd.hpp"
#include "microtorch/nearest_name.hpp"
#include "microtorch/ops.hpp"

namespace microtorch::nn {

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  if (const auto lt = name.find('<'); lt != std::string::npos) name.resize(lt);  // Wrapper<T> -> Wrapper
  if (const auto colons = name.rfind("::"); colons != std::string::npos) name.erase(0, colons + 2);
  return name;
}

Tensor Module::forward(const Tensor&) {
  throw ValueError(fmt::format("{}: this module does not take a single tensor; call its own forward(...) with the "
                               "arguments it documents",
                               type_name()));
}

void Module::check_new_name(const std::string& name) const {
  if (name.empty() || name.find('.') != std::string::npos) {
    throw ValueError(fmt::format("{}: invalid name \"{}\": names must be non-empty and contain no '.'", type_name(), name));
  }
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list) {
      if (n == name) return true;
    }
    return false;
  };
  if (taken(params_) || taken(buffers_) || taken(children_)) {
    throw ValueError(fmt::format("{}: the name \"{}\" is already registered", type_name(), name));
  }
}

Tensor Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name);
  if (requires_grad) value.requires_grad_(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name);
  buffers_.emplace_back(name, value);
  if (!persistent) non_persistent_.push_back(name);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  if (!module) throw ValueError(fmt::format("{}: register_module(\"{}\") got a null module", type_name(), name));
  children_.emplace_back(name, std::move(module));
}

namespace {

// own entries, then each child's under "<child>." (PyTorch's order)
template <class List>
NamedTensors with_children(NamedTensors own, const Module& m, List list) {
  for (const auto& [name, child] : m.named_children()) {
    for (auto& [n, t] : list(*child)) own.emplace_back(name + "." + n, t);
  }
  return own;
}

}  // namespace

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all = recurse ? with_children(params_, *this, [](const Module& c) { return c.named_parameters(); })
                             : params_;
  // a tied parameter once, under the first name (PyTorch's remove_duplicate)
  std::set<const TensorImpl*> seen;
  NamedTensors out;
  for (auto& entry : all) {
    if (seen.insert(entry.second.impl_ptr().get()).second) out.push_back(std::move(entry));
  }
  return out;
}

Tensor Module::replace_parameter(const std::string& name, const Tensor& shared) {
  auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& p) { return p.first == name; });
  if (it == params_.end()) {
    throw ValueError(fmt::format("{}: replace_parameter: no own parameter named \"{}\"", type_name(), name));
  }
  if (shared.shape() != it->second.shape()) {
    throw ShapeError(fmt::format("{}: replace_parameter(\"{}\"): the new tensor {} must have the parameter's shape {}",
                                 type_name(), name, shape_str(shared.shape()), shape_str(it->second.shape())));
  }
  if (shared.dtype() != it->second.dtype()) {
    throw DtypeError(fmt::format("{}: replace_parameter(\"{}\"): the new tensor is {}, the parameter {}", type_name(),
                                 name, dtype_name(shared.dtype()), dtype_name(it->second.dtype())));
  }
  it->second = shared;
  return shared;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  return recurse ? with_children(buffers_, *this, [](const Module& c) { return c.named_buffers(); }) : buffers_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [_, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [name, child] : children_) {
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  }
  return out;
}

Tensor Module::get(const std::string& dotted_name) const {
  std::vector<std::string> names;
  for (auto& [n, t] : state_dict()) {
    if (n == dotted_name) return t;
    names.push_back(n);
  }
  const std::string best = nearest_name(dotted_name, names);
  throw ValueError(fmt::format("{}: no parameter or buffer named \"{}\"{}", type_name(), dotted_name,
                               best.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", best)));
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.zero_grad();
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [_, m] : named_modules()) fn(*m);
}

std::int64_t Module::num_parameters(bool trainable_only) const {
  std::int64_t n = 0;
  for (auto& p : parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

void Module::summary_into(std::string& out, const std::string& name, int depth) const {
  const std::string indent(static_cast<std::size_t>(2 * depth), ' ');
  out += fmt::format("{}{}{}({})", indent, name.empty() ? "" : "(" + name + "): ", type_name(), extra_repr());
  std::int64_t own = 0;
  for (auto& [_, t] : params_) own += t.numel();
  if (own > 0) out += fmt::format("  # {} params", own);
  out += "\n";
  for (auto& [n, c] : children_) c->summary_into(out, n, depth + 1);
}

std::string Module::summary() const {
  std::string out;
  summary_into(out, "", 0);
  out += fmt::format("Total parameters: {} ({} trainable)", num_parameters(), num_parameters(true));
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors own = params_;
  for (const auto& [name, t] : buffers_) {
    if (std::find(non_persistent_.begin(), non_persistent_.end(), name) == non_persistent_.end()) own.emplace_back(name, t);
  }
  return with_children(std::move(own), *this, [](const Module& c) { return c.state_dict(); });
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> given;
  for (auto& [n, t] : state) given[n] = t;
  const NamedTensors mine = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  std::map<std::string, bool> known;
  for (auto& [name, t] : mine) {
    known[name] = true;
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
    } else if (it->second.shape() != t.shape()) {
      mismatched.push_back(fmt::format("{}: checkpoint {} vs module {}", name, shape_str(it->second.shape()),
                                       shape_str(t.shape())));
    } else if (it->second.dtype() != t.dtype() && !(it->second.is_floating_point() && t.is_floating_point())) {
      mismatched.push_back(fmt::format("{}: checkpoint dtype {} vs module dtype {}", name,
                                       dtype_name(it->second.dtype()), dtype_name(t.dtype())));
    }
  }
  for (auto& [name, _] : given) {
    if (known.count(name)) continue;
    const std::string near = nearest_name(name, missing);  // a renamed or mistyped key
    unexpected.push_back(near.empty() ? name : fmt::format("{} (did you mean {}?)", name, near));
  }
  if (!mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()))) {
    auto list = [](const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); };
    std::string msg = fmt::format("load_state_dict: {} does not match the state dict:", type_name());
    if (!missing.empty()) msg += "\n  missing keys: " + list(missing);
    if (!unexpected.empty()) msg += "\n  unexpected keys: " + list(unexpected);
    if (!mismatched.empty()) msg += "\n  shape/dtype mismatches: " + list(mismatched);
    if (mismatched.empty()) msg += "\n  (pass strict=false to load only the keys present in both)";
    throw ValueError(msg);
  }
  // All or nothing: every source is converted (and copied where it shares memory with a
  // destination) before the first write, so only non-throwing copies remain.
  std::set<const Storage*> destinations;
  for (auto& [_, t] : mine) destinations.insert(t.impl().storage.get());
  std::vector<std::pair<Tensor, Tensor>> writes;  // (destination, source of the same shape and dtype)
  {
    NoGradGuard no_grad;
    for (auto& [name, t] : mine) {
      auto it = given.find(name);
      if (it == given.end()) continue;
      Tensor src = it->second.detach().to(t.dtype());
      if (destinations.count(src.impl().storage.get()) != 0) src = src.clone();
      writes.emplace_back(t, std::move(src));
    }
  }
  for (const auto& write : writes) {
    const Tensor &dst = write.first, &src = write.second;  // (a lambda may not capture structured bindings in C++17)
    visit_dtype(dst.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::copy_n(src.template data<T>(), dst.numel(), dst.template data<T>());
    });
    dst.bump_version();
  }
}

}  // namespace microtorch::nn
