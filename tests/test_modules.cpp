// The module system: registration, dotted names, train/eval, state dicts, summary.
#include "helpers.hpp"
#include "microtorch/nn.hpp"
#include "microtorch/nearest_name.hpp"

using mt::Tensor;
namespace nn = microtorch::nn;

namespace {

struct Block : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::LayerNorm> norm;
  Tensor scale;
  Block() {
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(mt::Shape{4}));
    scale = register_buffer("scale", mt::full({1}, 2.0));
  }
  Tensor forward(const Tensor& x) override { return norm->forward(fc->forward(x)) * scale; }
  std::string type_name() const override { return "Block"; }
};

struct Net : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::ModuleList<Block>> blocks;
  std::shared_ptr<nn::Dropout> drop;
  Net() {
    emb = register_module("emb", std::make_shared<nn::Embedding>(10, 4));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList<Block>>());
    blocks->push_back(std::make_shared<Block>());
    blocks->push_back(std::make_shared<Block>());
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  }
  Tensor forward(const Tensor& idx) override {
    Tensor x = emb->forward(idx);
    for (const auto& b : *blocks) x = b->forward(x);
    return drop->forward(x);
  }
  std::string type_name() const override { return "Net"; }
};

std::vector<std::string> keys(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (auto& [n, _] : named) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("named_parameters use PyTorch's dotted names in registration order") {
  Net net;
  CHECK(keys(net.named_parameters()) ==
        std::vector<std::string>{"emb.weight", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.norm.weight",
                                 "blocks.0.norm.bias", "blocks.1.fc.weight", "blocks.1.fc.bias",
                                 "blocks.1.norm.weight", "blocks.1.norm.bias"});
  CHECK(keys(net.named_buffers()) == std::vector<std::string>{"blocks.0.scale", "blocks.1.scale"});
  CHECK(net.state_dict().size() == 11);
  CHECK(net.num_parameters() == 40 + 2 * (16 + 4 + 4 + 4));
  CHECK(net.children().size() == 3);
  CHECK(net.named_modules().size() == 1 + 1 + 1 + 2 * 3 + 1);
  CHECK(net.get("blocks.1.fc.bias").shape() == mt::Shape{4});
  CHECK_THROWS_MSG(net.get("blocks.2.fc.bias"), mt::ValueError, "blocks.2.fc.bias");
  for (auto& p : net.parameters()) CHECK(p.requires_grad());
}

TEST_CASE("train() and eval() reach every descendant and switch dropout") {
  mt::manual_seed(1);
  Net net;
  Tensor idx = mt::tensor({{1, 2, 3}}, mt::kInt64);
  net.eval();
  CHECK_FALSE(net.drop->is_training());
  CHECK_FALSE(net.blocks->operator[](1)->is_training());
  CHECK(mt::equal(net.forward(idx), net.forward(idx)));
  net.train();
  CHECK(net.drop->is_training());
  Tensor y = net.forward(idx);
  CHECK(mt::sum(y == 0.0).item() > 0);
}

TEST_CASE("zero_grad and apply visit every parameter and module") {
  Net net;
  net.forward(mt::tensor({{1, 2}}, mt::kInt64)).sum().backward();
  CHECK(net.blocks->operator[](0)->fc->weight.grad().defined());
  net.zero_grad();
  for (auto& p : net.parameters()) CHECK_FALSE(p.grad().defined());
  int linears = 0;
  net.apply([&](nn::Module& m) { linears += m.type_name() == "Linear"; });
  CHECK(linears == 2);
}

TEST_CASE("state_dict round-trips into a fresh model; load_state_dict checks before writing") {
  mt::manual_seed(2);
  Net a;
  mt::manual_seed(3);
  Net b;
  Tensor idx = mt::tensor({{4, 5}}, mt::kInt64);
  a.eval();
  b.eval();
  CHECK_FALSE(mt::allclose(a.forward(idx), b.forward(idx)));
  b.load_state_dict(a.state_dict());
  CHECK(mt::equal(a.forward(idx), b.forward(idx)));

  nn::NamedTensors broken = a.state_dict();
  broken.erase(broken.begin());                                    // missing emb.weight
  broken.emplace_back("blocks.9.fc.weight", mt::zeros({4, 4}));    // unexpected
  for (auto& [name, t] : broken) {
    if (name == "blocks.0.fc.weight") t = mt::zeros({3, 4});       // wrong shape
  }
  Tensor before = b.blocks->operator[](1)->fc->bias.clone();
  CHECK_THROWS_MSG(b.load_state_dict(broken), mt::ValueError, "missing keys: emb.weight",
                   "unexpected keys: blocks.9.fc.weight", "blocks.0.fc.weight: checkpoint [3, 4] vs module [4, 4]");
  CHECK(mt::equal(before, b.blocks->operator[](1)->fc->bias));  // nothing was written
  nn::NamedTensors partial = {{"emb.weight", mt::zeros({10, 4})}};
  b.load_state_dict(partial, /*strict=*/false);
  CHECK(mt::sum(b.emb->weight).item() == 0.0);

  // A mistyped or renamed key is named beside the missing one it most likely is; a parameter
  // asked for by a wrong name suggests the nearest one.
  nn::NamedTensors typo = a.state_dict();
  for (auto& [name, t] : typo) {
    if (name == "emb.weight") name = "emb.wieght";
  }
  CHECK_THROWS_MSG(b.load_state_dict(typo), mt::ValueError, "missing keys: emb.weight",
                   "unexpected keys: emb.wieght (did you mean emb.weight?)");
  CHECK_THROWS_MSG(b.get("blocks.0.fc.wieght"), mt::ValueError, "no parameter or buffer named \"blocks.0.fc.wieght\" "
                   "(did you mean \"blocks.0.fc.weight\"?)");
  CHECK_THROWS_MSG(b.get("completely.different"), mt::ValueError, "no parameter or buffer named \"completely.different\"");
  CHECK(mt::nearest_name("--bit", {"--bits", "--target"}) == "--bits");
  CHECK(mt::nearest_name("xyz", {"--bits", "--target"}).empty());
}

TEST_CASE("registration refuses duplicate and dotted names") {
  struct Bad : nn::Module {
    std::string type_name() const override { return "Bad"; }
    void twice() {
      register_parameter("w", mt::zeros({1}));
      register_parameter("w", mt::zeros({1}));
    }
    void dotted() { register_buffer("a.b", mt::zeros({1})); }
  } bad;
  CHECK_THROWS_MSG(bad.twice(), mt::ValueError, "\"w\" is already registered");
  CHECK_THROWS_MSG(bad.dotted(), mt::ValueError, "no '.'");
  CHECK_THROWS_MSG(bad.forward(mt::zeros({1})), mt::ValueError, "Bad", "single tensor");
}

TEST_CASE("Sequential chains modules and summary shows the tree with parameter counts") {
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(3, 5), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(5, 2),
      std::make_shared<nn::Softmax>(-1)});
  Tensor y = seq->forward(mt::randn({7, 3}));
  CHECK(y.shape() == mt::Shape{7, 2});
  CHECK_CLOSE(mt::sum(y, {-1}), mt::ones({7}), 1e-6, 1e-6);
  CHECK(keys(seq->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  const std::string s = seq->summary();
  CHECK(s.find("Sequential()") != std::string::npos);
  CHECK(s.find("(0): Linear(in_features=3, out_features=5, bias=true)  # 20 params") != std::string::npos);
  CHECK(s.find("(3): Softmax(dim=-1)") != std::string::npos);
  CHECK(s.find("Total parameters: 32 (32 trainable)") != std::string::npos);
  CHECK_THROWS_MSG((*seq)[4], mt::IndexError, "index 4", "4 modules");
}

TEST_CASE("Linear and MultiheadAttention use PyTorch's initialisation bounds") {
  mt::manual_seed(4);
  nn::Linear lin(100, 50);
  CHECK(mt::max(mt::abs(lin.weight)).item() <= 0.1);
  CHECK(mt::max(mt::abs(lin.weight)).item() > 0.09);
  nn::MultiheadAttention mha(16, 4);
  CHECK(mt::sum(mt::abs(mha.in_proj_bias)).item() == 0.0);
  CHECK(mt::max(mt::abs(mha.in_proj_weight)).item() <= std::sqrt(6.0 / (16 + 48)));
  nn::Linear nobias(3, 3, {.bias = false});
  CHECK_FALSE(nobias.bias.defined());
  CHECK(nobias.named_parameters().size() == 1);
}

namespace user_code {
struct Residual : nn::Module {  // no type_name(): the default names it after the class
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(2, 2));
  Tensor forward(const Tensor& x) override { return x + fc->forward(x); }
};
template <class T>
struct Wrapper : nn::Module {
  std::shared_ptr<T> inner = register_module("inner", std::make_shared<T>());
};
}  // namespace user_code

TEST_CASE("a user module needs no type_name(): the default is its class name without namespaces or templates") {
  user_code::Wrapper<user_code::Residual> m;
  CHECK(m.type_name() == "Wrapper");
  CHECK(m.inner->type_name() == "Residual");
  CHECK(nn::Linear(2, 3).type_name() == "Linear");
  CHECK(nn::ModuleList<nn::Linear>().type_name() == "ModuleList");
  const std::string s = m.summary();
  CHECK(s.find("Wrapper()") != std::string::npos);
  CHECK(s.find("(inner): Residual()") != std::string::npos);
  CHECK(s.find("(fc): Linear(in_features=2, out_features=2") != std::string::npos);
}
