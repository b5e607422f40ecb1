// The tape: accumulation, retain_graph, grad mode, freeing, deep graphs, records.
#include <memory>

#include "helpers.hpp"
#include "microtorch/nn/layers.hpp"
#include "microtorch/nn/loss.hpp"
#include "microtorch/nn/optim.hpp"

using mt::Tensor;

TEST_CASE("backward accumulates into .grad across calls until zero_grad") {
  Tensor x = mt::tensor({1.0, 2.0}).requires_grad_();
  (x * x).sum().backward();
  CHECK_CLOSE(x.grad(), mt::tensor({2.0, 4.0}), 0, 0);
  (x * 3.0).sum().backward();
  CHECK_CLOSE(x.grad(), mt::tensor({5.0, 7.0}), 0, 0);
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a tensor used twice receives the sum of both gradients (diamond graph)") {
  Tensor x = mt::tensor({3.0}, mt::kFloat64).requires_grad_();
  Tensor a = x * 2.0, b = mt::exp(x);
  (a * b).sum().backward();  // d/dx (2x e^x) = 2 e^x + 2x e^x
  CHECK(x.grad().item() == doctest::Approx(2 * std::exp(3.0) * 4.0));
}

TEST_CASE("backward twice needs retain_graph; with it, gradients add up") {
  Tensor x = mt::tensor({1.0, -1.0}).requires_grad_();
  Tensor y = (mt::exp(x) * x).sum();
  y.backward({}, /*retain_graph=*/true);
  Tensor first = x.grad().clone();
  y.backward();
  CHECK_CLOSE(x.grad(), first * 2.0, 1e-6, 1e-6);
  CHECK_THROWS_MSG(y.backward(), mt::AutogradError, "second time", "retain_graph=true");
}

TEST_CASE("a non-scalar output needs an explicit gradient") {
  Tensor x = mt::ones({2, 3}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_THROWS_MSG(y.backward(), mt::AutogradError, "[2, 3]", "loss.sum()");
  CHECK_THROWS_MSG(y.backward(mt::ones({3})), mt::ShapeError, "[3]", "[2, 3]");
  y.backward(mt::full({2, 3}, 0.5));
  CHECK_CLOSE(x.grad(), mt::ones({2, 3}), 0, 0);
}

TEST_CASE("backward on a tensor that does not require grad explains why") {
  Tensor x = mt::ones({2});
  CHECK_THROWS_MSG((x * 2.0).sum().backward(), mt::AutogradError, "does not require grad", "requires_grad_()");
}

TEST_CASE("NoGradGuard records nothing and restores the previous mode") {
  Tensor w = mt::ones({2}).requires_grad_();
  {
    mt::NoGradGuard outer;
    {
      mt::NoGradGuard inner;
      CHECK_FALSE(mt::is_grad_enabled());
    }
    CHECK_FALSE(mt::is_grad_enabled());
    Tensor y = w * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    w.add_(mt::ones({2}), -0.5);  // optimizer-style in-place update is allowed here
  }
  CHECK(mt::is_grad_enabled());
  CHECK_CLOSE(w, mt::full({2}, 0.5), 0, 0);
  CHECK((w * 2.0).requires_grad());
}

TEST_CASE("in-place writes to tensors the tape depends on are refused") {
  Tensor w = mt::ones({2}).requires_grad_();
  CHECK_THROWS_MSG(w.fill_(0.0), mt::AutogradError, "fill_", "NoGradGuard");
  Tensor y = w * 2.0;
  CHECK_THROWS_MSG(y.mul_(2.0), mt::AutogradError, "mul_", "MulBackward");
}

TEST_CASE("detach shares memory but leaves the graph") {
  Tensor x = mt::tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  CHECK(d.shares_storage(y));
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
}

TEST_CASE("retain_grad keeps the gradient of an intermediate tensor") {
  Tensor x = mt::tensor({1.0, 2.0}).requires_grad_();
  Tensor h = x * 3.0;
  h.retain_grad();
  (h * h).sum().backward();
  CHECK_CLOSE(h.grad(), mt::tensor({6.0, 12.0}), 0, 0);
  CHECK_CLOSE(x.grad(), mt::tensor({18.0, 36.0}), 0, 0);
}

TEST_CASE("the gradients of two leaves are independent tensors") {
  Tensor a = mt::ones({2}).requires_grad_();
  Tensor b = mt::ones({2}).requires_grad_();
  (a + b).sum().backward();
  {
    mt::NoGradGuard g;
    a.grad().mul_(10.0);  // e.g. gradient clipping
  }
  CHECK_CLOSE(b.grad(), mt::ones({2}), 0, 0);
}

TEST_CASE("gradients arrive in each input's dtype when dtypes mix") {
  Tensor a = mt::ones({2}, mt::kFloat32).requires_grad_();
  Tensor b = mt::ones({2}, mt::kFloat64).requires_grad_();
  Tensor y = (a * b).sum();
  CHECK(y.dtype() == mt::kFloat64);
  y.backward();
  CHECK(a.grad().dtype() == mt::kFloat32);
  CHECK(b.grad().dtype() == mt::kFloat64);
}

TEST_CASE("a 10,000-op chain backpropagates without recursion") {
  Tensor x = mt::tensor({1.0}, mt::kFloat64).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 10000; ++i) y = y * 1.0001;
  y.sum().backward();
  CHECK(x.grad().item() == doctest::Approx(std::pow(1.0001, 10000)).epsilon(1e-9));
}

TEST_CASE("dropping a 200,000-op graph without backward does not overflow the stack") {
  Tensor x = mt::tensor({1.0}).requires_grad_();
  std::weak_ptr<mt::autograd::Node> first;
  {
    Tensor y = x + 1.0;
    first = y.grad_fn();
    for (int i = 0; i < 200000; ++i) y = y + 1.0;
  }
  CHECK(first.expired());
}

TEST_CASE("the graph is freed after backward: nodes and saved tensors are released") {
  Tensor x = mt::tensor({0.5, 1.5}).requires_grad_();
  std::weak_ptr<mt::autograd::Node> inner, root;
  std::weak_ptr<mt::TensorImpl> h_impl;
  Tensor loss;
  {
    Tensor h = mt::exp(x * 2.0);  // exp saves its output h
    h_impl = h.impl_ptr();
    inner = h.grad_fn();
    loss = (h * h).sum();  // mul saves h twice
    root = loss.grad_fn();
  }
  CHECK_FALSE(inner.expired());   // still reachable from loss
  CHECK_FALSE(h_impl.expired());  // mul saved its input h itself (exp saved a detached copy)
  loss.backward();
  CHECK(inner.expired());   // backward unlinked the graph
  CHECK(h_impl.expired());  // and released what it saved
  CHECK_FALSE(root.expired());  // the output still names its grad_fn, as in PyTorch
  loss = Tensor();
  CHECK(root.expired());
}

TEST_CASE("a training loop frees every step's graph") {
  // Under LeakSanitizer (make test's sanitizer pass) a cycle would also be reported at exit;
  // here every node and every activation of each step is checked to be gone after it.
  mt::manual_seed(5);
  mt::nn::Linear fc1(4, 8), fc2(8, 3);
  std::vector<Tensor> params = fc1.parameters();
  for (const auto& p : fc2.parameters()) params.push_back(p);
  mt::optim::AdamW opt(params, {.lr = 1e-2});
  const Tensor x = mt::randn({16, 4});
  const Tensor target = mt::randint(0, 3, {16});
  std::vector<std::weak_ptr<mt::autograd::Node>> nodes;
  std::vector<std::weak_ptr<mt::Storage>> activations;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    Tensor h = mt::relu(fc1.forward(x));
    Tensor loss = mt::nn::functional::cross_entropy(fc2.forward(h), target);
    activations.push_back(h.impl().storage);
    std::vector<std::shared_ptr<mt::autograd::Node>> stack{loss.grad_fn()};
    while (!stack.empty()) {
      auto n = stack.back();
      stack.pop_back();
      nodes.push_back(n);
      for (auto& e : n->inputs) {
        if (e.node) stack.push_back(e.node);
      }
    }
    loss.backward();
    opt.step();
  }
  CHECK(nodes.size() >= 20 * 4);
  std::size_t alive = 0;
  for (auto& n : nodes) alive += n.expired() ? 0 : 1;
  for (auto& a : activations) alive += a.expired() ? 0 : 1;
  CHECK(alive == 0);
}

TEST_CASE("without backward, dropping the output frees every node (no shared_ptr cycles)") {
  Tensor x = mt::ones({3}).requires_grad_();
  std::vector<std::weak_ptr<mt::autograd::Node>> nodes;
  {
    Tensor y = mt::softmax(mt::relu(x * 2.0) + mt::exp(x), -1).sum();
    std::vector<std::shared_ptr<mt::autograd::Node>> stack{y.grad_fn()};
    while (!stack.empty()) {
      auto n = stack.back();
      stack.pop_back();
      nodes.push_back(n);
      for (auto& e : n->inputs) {
        if (e.node) stack.push_back(e.node);
      }
    }
  }
  CHECK(nodes.size() >= 5);
  for (auto& n : nodes) CHECK(n.expired());
}

TEST_CASE("nodes record the op name, attributes and shapes a tracer needs") {
  Tensor x = mt::ones({2, 3}).requires_grad_();
  Tensor y = mt::softmax(x, -1);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->op == "softmax");
  CHECK(y.grad_fn()->name() == "SoftmaxBackward");
  REQUIRE(y.grad_fn()->attr("dim") != nullptr);
  CHECK(std::get<std::int64_t>(*y.grad_fn()->attr("dim")) == 1);
  CHECK(y.grad_fn()->shape == mt::Shape{2, 3});
  CHECK(y.grad_fn()->inputs.size() == 1);
  CHECK(y.grad_fn()->inputs[0].leaf == x.impl_ptr());
  Tensor z = mt::matmul(y, mt::ones({3, 4}));
  CHECK(z.grad_fn()->name() == "MatmulBackward");
  CHECK(z.grad_fn()->inputs[0].node == y.grad_fn());
  CHECK_FALSE(z.grad_fn()->inputs[1].requires_grad);
}

TEST_CASE("integer and bool results are never recorded") {
  Tensor x = mt::tensor({1.0, -2.0}).requires_grad_();
  Tensor m = x > 0.0;
  CHECK(m.dtype() == mt::kBool);
  CHECK_FALSE(m.requires_grad());
  CHECK_FALSE(mt::argmax(x).requires_grad());
  CHECK_THROWS_MSG(mt::ones({2}, mt::kInt64).requires_grad_(), mt::DtypeError, "int64", "kFloat32");
}
