// The handle: aliasing, copies, element access, dtype conversion.
#include "helpers.hpp"
#include "microtorch/xtensor.hpp"

using mt::Tensor;

TEST_CASE("copying a Tensor aliases; clone copies") {
  Tensor a = mt::zeros({2, 2});
  Tensor b = a;
  Tensor c = a.clone();
  {
    mt::NoGradGuard g;
    b.fill_(7.0);
  }
  CHECK(a.at<float>({1, 1}) == 7.0f);
  CHECK(c.at<float>({1, 1}) == 0.0f);
  CHECK(a.is_same(b));
  CHECK_FALSE(a.shares_storage(c));
}

TEST_CASE("from an xtensor array (copied), and back to xarray") {
  xt::xarray<double> arr = {{1.0, 2.0}, {3.0, 4.0}};
  Tensor t(arr);
  CHECK(t.dtype() == mt::kFloat64);
  CHECK(t.shape() == mt::Shape{2, 2});
  xt::xarray<float> back = t.to_xarray<float>();
  CHECK(back(1, 0) == 3.0f);
  Tensor e = Tensor::from_array(xt::xarray<std::int64_t>{5, 6} * std::int64_t(2));
  CHECK(e.dtype() == mt::kInt64);
  CHECK(e.at<std::int64_t>({-1}) == 12);
}

TEST_CASE("array() is a live xtensor view usable in expressions") {
  Tensor t = mt::arange(0.0, 6.0, 1.0, mt::kFloat32).reshape({2, 3});
  auto view = t.array<float>();
  CHECK(view(1, 2) == 5.0f);
  xt::xarray<float> doubled = view * 2.0f;
  CHECK(doubled(1, 1) == 8.0f);
  CHECK_THROWS_MSG(t.array<double>(), mt::DtypeError, "float32", "float64");
}

TEST_CASE("item and at read single elements, with negative indices") {
  Tensor t = mt::tensor({{1.5, 2.5}, {3.5, 4.5}});
  CHECK(t.at({-1, 0}) == 3.5);
  CHECK(mt::sum(t).item() == 12.0);
  CHECK(mt::tensor(2.0).item<int>() == 2);
  CHECK_THROWS_MSG(t.item(), mt::ValueError, "one-element", "[2, 2]");
  CHECK_THROWS_MSG(t.at({2, 0}), mt::IndexError, "index 2", "size 2");
  CHECK_THROWS_MSG(t.at({0}), mt::IndexError, "1 indices", "[2, 2]");
}

TEST_CASE("to() converts between the four dtypes") {
  Tensor f = mt::tensor({-1.5, 0.0, 2.7});
  CHECK(f.to(mt::kInt64).at<std::int64_t>({2}) == 2);
  CHECK(f.to(mt::kBool).at<bool>({0}) == true);
  CHECK(f.to(mt::kBool).at<bool>({1}) == false);
  CHECK(f.to(mt::kFloat64).dtype() == mt::kFloat64);
  CHECK(f.to(mt::kFloat32).is_same(f));
  CHECK(mt::dtype_name(mt::kBool) == "bool");
  CHECK(mt::promote_types(mt::kInt64, mt::kFloat32) == mt::kFloat32);
  CHECK(mt::promote_types(mt::kBool, mt::kInt64) == mt::kInt64);
  CHECK(mt::promote_types(mt::kFloat64, mt::kFloat32) == mt::kFloat64);
}

TEST_CASE("an undefined tensor says so instead of crashing") {
  Tensor u;
  CHECK_FALSE(u.defined());
  CHECK_THROWS_MSG(u.shape(), mt::ValueError, "undefined", "defined()");
  Tensor x = mt::ones({1}).requires_grad_();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("copy_ and add_ broadcast the source into the destination") {
  Tensor d = mt::zeros({2, 3});
  d.copy_(mt::tensor({1.0, 2.0, 3.0}));
  CHECK_CLOSE(d.sum(), mt::tensor(12.0), 0, 0);
  d.add_(mt::ones({3}), 2.0);
  CHECK(d.at({1, 2}) == 5.0);
  CHECK_THROWS_MSG(d.copy_(mt::ones({4})), mt::ShapeError, "copy_");
  CHECK_THROWS_MSG(mt::ones({3}).add_(mt::ones({2, 3})), mt::ShapeError, "add_", "[2, 3]");
}

TEST_CASE("size, dim and numel with negative dims") {
  Tensor t = mt::zeros({2, 3, 4});
  CHECK(t.size(-1) == 4);
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 24);
  CHECK_THROWS_MSG(t.size(3), mt::IndexError, "dim 3", "-3 .. 2");
}

TEST_CASE("tensors from user data: values with a shape, std::vector of each element type, back to std::vector") {
  const Tensor a = mt::tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(a.dtype() == mt::kFloat32);
  CHECK(a.shape() == mt::Shape{2, 3});
  CHECK(a.at<float>({1, 2}) == 6.0f);
  CHECK(mt::tensor({1, 2}, {2}, mt::kFloat64).dtype() == mt::kFloat64);
  CHECK_THROWS_MSG(mt::tensor({1, 2, 3}, {2, 2}), mt::ShapeError, "3 values", "[2, 2]");
  CHECK(mt::tensor(std::vector<double>{1.5, 2.5}, {2, 1}).dtype() == mt::kFloat64);
  const Tensor ints = mt::tensor(std::vector<int>{4, -5, 6}, {3});
  CHECK(ints.dtype() == mt::kInt64);
  CHECK(ints.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, -5, 6});
  const Tensor bits = mt::tensor(std::vector<bool>{true, false, true}, {3});
  CHECK(bits.dtype() == mt::kBool);
  CHECK(bits.to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(a.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});  // converted
  CHECK(mt::tensor(std::vector<float>{}, {0, 3}).numel() == 0);
}

TEST_CASE("from_blob is a view of the caller's memory: no copy, writes go through, the deleter runs last") {
  std::vector<float> buf{1, 2, 3, 4};
  Tensor v = mt::from_blob(buf.data(), {2, 2});
  CHECK(v.data<float>() == buf.data());
  buf[0] = 10;
  CHECK(v.at<float>({0, 0}) == 10.0f);
  v.mul_(2.0);
  CHECK(buf[3] == 8.0f);
  CHECK(mt::equal(v.clone() * 1.0, v));  // clone() copies out of the blob
  CHECK_THROWS_MSG(mt::from_blob(static_cast<float*>(nullptr), {2}), mt::ValueError, "from_blob", "null");

  // The deleter waits for every sharer: a view, and a tensor saved for backward.
  int released = 0;
  {
    auto* mem = new double[3]{1, 2, 3};
    Tensor w = mt::from_blob(mem, {3}, [&released](void* p) {
      delete[] static_cast<double*>(p);
      ++released;
    });
    w.requires_grad_();
    Tensor loss = (w * w).sum();  // mul saves w
    w = Tensor();
    CHECK(released == 0);
    loss.backward();
  }
  CHECK(released == 1);
  std::vector<double> wmem{1, 2};
  Tensor w = mt::from_blob(wmem.data(), {2}).requires_grad_();
  (w * w).sum().backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 4});
}
