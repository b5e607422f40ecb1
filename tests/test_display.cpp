// Rich display for notebooks: the HTML table of a tensor, the SVG heat map of attention
// weights, and the mime bundles xeus-cling asks for.
#include <cstdlib>
#include <string>

#include "helpers.hpp"
#include "microtorch/display.hpp"
#include "microtorch/io.hpp"
#include "../examples/models/iris_figures.hpp"

namespace display = mt::display;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("display: a 2-d tensor is a table with a dtype/shape caption, one row per row, one cell per element") {
  const std::string h = display::html(mt::tensor({{1.5, -2.0, 3.25}, {4.0, 5.0, 6.125}}));
  INFO(h);
  CHECK(h.find("<caption>Tensor float32 [2, 3]</caption>") != std::string::npos);
  CHECK(count(h, "<tr>") == 3);   // header + 2 rows
  CHECK(count(h, "<td>") == 6);
  CHECK(h.find("<td>1.5</td>") != std::string::npos);
  CHECK(h.find("<td>-2</td>") != std::string::npos);
  CHECK(h.find("<td>6.125</td>") != std::string::npos);
  CHECK(h.find("<th>[1, :]</th>") != std::string::npos);
}

TEST_CASE("display: dtypes, 0-d, 1-d, 3-d, empty and requires_grad tensors") {
  const std::string b = display::html(mt::tensor({1.0, 2.0}) > 1.5);
  CHECK(b.find("Tensor bool [2]") != std::string::npos);
  CHECK(b.find("<td>false</td><td>true</td>") != std::string::npos);
  const std::string i = display::html(mt::arange(3));
  CHECK(i.find("Tensor int64 [3]") != std::string::npos);
  CHECK(i.find("<td>0</td><td>1</td><td>2</td>") != std::string::npos);
  const std::string s = display::html(mt::full({}, 0.125, mt::kFloat64));
  CHECK(s.find("Tensor float64 []") != std::string::npos);
  CHECK(count(s, "<td>") == 1);
  CHECK(s.find("<td>0.125</td>") != std::string::npos);
  const std::string t = display::html(mt::zeros({2, 2, 3}));
  CHECK(count(t, "<td>") == 12);
  CHECK(t.find("<th>[1, 0, :]</th>") != std::string::npos);
  CHECK(display::html(mt::zeros({0, 3})).find("(empty)") != std::string::npos);
  CHECK(display::html(mt::zeros({2}).requires_grad_()).find("requires_grad") != std::string::npos);
  CHECK(display::html(mt::Tensor()).find("undefined") != std::string::npos);
}

TEST_CASE("display: big tensors keep the first and last rows and columns with an ellipsis between") {
  const mt::Tensor big = mt::arange(0, 100 * 50).reshape({100, 50});
  display::HtmlOptions o;
  o.max_rows = 6, o.max_cols = 4;
  const std::string h = display::html(big, o);
  INFO(h);
  CHECK(count(h, "<tr>") == 1 + 7);          // header, 3 rows, the ellipsis row, 3 rows
  CHECK(count(h, "&vellip;") == 1 + 5);      // its header cell and 4 + 1 data cells
  CHECK(count(h, "<td>&hellip;</td>") == 6); // one per shown data row
  CHECK(h.find("<td>0</td><td>1</td><td>&hellip;</td><td>48</td><td>49</td>") != std::string::npos);
  CHECK(h.find("<td>4999</td>") != std::string::npos);
  CHECK(h.find("<td>2500</td>") == std::string::npos);  // a middle row is elided
  CHECK(h.size() < 4000);
  // the defaults truncate too: a 1000 x 1000 tensor stays a small table
  CHECK(display::html(mt::zeros({1000, 1000})).size() < 6000);
}

TEST_CASE("display: escape makes text safe for HTML and SVG") {
  CHECK(display::escape("<pad> & \"x\" 'y'") == "&lt;pad&gt; &amp; &quot;x&quot; &#39;y&#39;");
  CHECK(display::escape("plain") == "plain");
}

TEST_CASE("display: Heatmap draws one cell per weight, darker for larger, with escaped labels and a colour bar") {
  const mt::Tensor w = mt::tensor({{1.0, 0.0, 0.0}, {0.5, 0.5, 0.0}});
  const display::Heatmap map{w, {"<q0>", "q1"}, {"a&b", "k1", "k2"}, "causal"};
  const std::string s = map.svg();
  INFO(s);
  CHECK(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(s.find("</svg>") == s.size() - 6);
  CHECK(count(s, "</title></rect>") == 6);  // one cell per weight
  CHECK(s.find("&lt;q0&gt;") != std::string::npos);
  CHECK(s.find("a&amp;b") != std::string::npos);
  CHECK(s.find("<q0>") == std::string::npos);
  CHECK(s.find(">causal</text>") != std::string::npos);
  CHECK(count(s, "fill=\"#08306b\" stroke") == 1);  // the 1.0 cell: darkest
  CHECK(count(s, "fill=\"#f7fbff\" stroke") == 3);  // the three 0.0 cells: white
  CHECK(s.find(">0.50</text>") != std::string::npos);  // values written in small maps
  CHECK(s.find("<title>q1 &#8594; k1: 0.5</title>") != std::string::npos);
  CHECK(s.find(">key</text>") != std::string::npos);    // axis names
  CHECK(s.find(">query</text>") != std::string::npos);
  CHECK(s.find("url(#microtorch-shade)") != std::string::npos);  // the colour bar, 0 to 1 in round ticks
  CHECK(s.find(">0.0</text>") != std::string::npos);
  CHECK(s.find(">1.0</text>") != std::string::npos);
}

TEST_CASE("display: Heatmap takes [1, L, S] weights, default labels, and rejects what it cannot draw") {
  const std::string s = display::Heatmap{mt::full({1, 2, 2}, 0.25)}.svg();
  CHECK(count(s, "</title></rect>") == 4);
  CHECK(s.find("<title>1 &#8594; 0: 0.25</title>") != std::string::npos);
  CHECK_THROWS_AS((display::Heatmap{mt::zeros({2, 2, 2})}.svg()), mt::ShapeError);
  CHECK_THROWS_AS((display::Heatmap{mt::zeros({2, 2}), {"only one"}}.svg()), mt::ValueError);
  // 20 x 20: no numbers in the cells, tooltips still there
  const std::string big = display::Heatmap{mt::zeros({20, 20})}.svg();
  CHECK(count(big, "</title></rect>") == 400);
  CHECK(count(big, "font-size=\"9\"") == 0);
  // 64 x 64: smaller cells, every other label (they would overlap)
  const std::string huge = display::Heatmap{mt::zeros({64, 64})}.svg();
  CHECK(count(huge, "text-anchor=\"end\"") == 32);
}

TEST_CASE("display: a confusion matrix counts predictions per true class") {
  const mt::Tensor predicted = mt::tensor(std::vector<std::int64_t>{0, 1, 1, 2, 2, 2}, {6});
  const mt::Tensor target = mt::tensor(std::vector<std::int64_t>{0, 1, 2, 2, 2, 0}, {6});
  const display::Heatmap m = display::confusion_matrix(predicted, target, {"a", "b", "c"});
  CHECK(mt::equal(m.weights, mt::tensor({{1, 0, 1}, {0, 1, 0}, {0, 1, 2}}, mt::kFloat64)));
  const std::string s = m.svg();
  CHECK(s.find(">predicted</text>") != std::string::npos);
  CHECK(s.find(">2</text>") != std::string::npos);  // counts written as integers
  CHECK(s.find("<title>c &#8594; c: 2</title>") != std::string::npos);
  CHECK_THROWS_MSG(display::confusion_matrix(predicted, target, {"a", "b"}), mt::IndexError, "outside the 2 classes");
  CHECK_THROWS_AS(display::confusion_matrix(predicted.to(mt::kFloat32), target, {"a", "b", "c"}), mt::ShapeError);
}

#ifdef MICROTORCH_DISPLAY_HAS_JSON
TEST_CASE("display: mime bundles for xeus-cling, found by argument-dependent lookup") {
  const mt::Tensor t = mt::tensor({{1.0, 2.0}});
  const nl::json bundle = mime_bundle_repr(t);  // unqualified: ADL, as xeus-cling calls it
  CHECK(bundle.is_object());
  CHECK(bundle["text/html"].get<std::string>() == display::html(t));
  CHECK(bundle["text/plain"].get<std::string>() == fmt::format("{}", t));
  const display::Heatmap map{mt::eye(3)};
  const nl::json svg = mime_bundle_repr(map);
  CHECK(svg["image/svg+xml"].get<std::string>() == map.svg());
  CHECK(svg["text/plain"].get<std::string>() == "Heatmap [3, 3]");
}
#endif

TEST_CASE("display: LineChart draws each series over round ticks with gridlines and a legend") {
  const display::LineChart chart{{4.0, 2.0, 1.0, 0.5}, "loss <curve>"};
  const std::string svg = chart.svg();
  INFO(svg);
  CHECK(count(svg, "<polyline") == 1);
  CHECK(svg.find("loss &lt;curve&gt;") != std::string::npos);
  for (const char* tick : {">0<", ">1<", ">2<", ">3<", ">4<"}) CHECK(svg.find(tick) != std::string::npos);
  CHECK(count(svg, "stroke=\"#e0e0e0\"") == 5 + 4);  // gridlines: y at 0..4, x at epochs 1..4
  // the first point is the top left corner of the plot (epoch 1, value 4 = the top tick)
  const auto frame = svg.find("fill=\"none\" stroke=\"#888888\"");
  REQUIRE(frame != std::string::npos);
  const std::string rect = svg.substr(svg.rfind("<rect", frame), frame - svg.rfind("<rect", frame));
  const std::string x = rect.substr(rect.find("x=\"") + 3), y = rect.substr(rect.find("y=\"") + 3);
  CHECK(svg.find("points=\"" + x.substr(0, x.find('"')) + "," + y.substr(0, y.find('"')) + " ") != std::string::npos);

  display::LineChart two{.title = "train and validation"};
  two.series = {{"train", {3, 2, 1.5, 1.2}}, {"validation", {3.5, 2.5, 2, 2.2}}};
  const std::string s2 = two.svg();
  CHECK(count(s2, "<polyline") == 2);
  CHECK(s2.find(">train</text>") != std::string::npos);  // the legend
  CHECK(s2.find(">validation</text>") != std::string::npos);

  const display::LineChart log_chart{{100.0, 10.0, 1.0}, "", "step", "loss", true};
  const std::string s3 = log_chart.svg();
  CHECK(s3.find("(log scale)") != std::string::npos);
  CHECK(s3.find(">100<") != std::string::npos);
  CHECK_THROWS_AS(display::LineChart{{}}.svg(), mt::ValueError);
  CHECK_THROWS_AS((display::LineChart{{1.0, 0.0}, "", "x", "y", true}.svg()), mt::ValueError);
}

TEST_CASE("display: a title too long for the picture is set smaller or broken into lines, never cut") {
  const std::string title(40, 'w');
  const std::string words = "a title with many words that would run far past the right edge of a small heat map";
  const std::string a = display::Heatmap{mt::eye(2), {}, {}, words}.svg();
  CHECK(count(a, "font-weight=\"bold\"") >= 3);  // several lines
  const std::string joined = display::side_by_side({a, a});
  CHECK(joined.find("<svg x=\"0\" y=\"0\"") != std::string::npos);
  CHECK(count(joined, "class=\"microtorch-heatmap\"") == 2);
}

TEST_CASE("display: the demo's figures (training curves, attention per head, confusion matrix)") {
  // The figures make demo draws, from a shorter training run; with MICROTORCH_FIGURES_DIR set
  // they are written there, and tools/check_svg.py renders them (make test).
  iris_transformer::IrisTransformer model;
  const iris_transformer::Split data = iris_transformer::split();
  const auto h = iris_transformer::train_with_history(model, data, {.epochs = 30},
                                                      [](int, std::int64_t, double) {}, [](int, const iris_transformer::History&) {});
  REQUIRE(h.train_loss.size() == 30);
  CHECK(h.train_loss.back() < h.train_loss.front());
  CHECK(h.test_accuracy.back() > 80);
  const std::vector<std::pair<std::string, std::string>> figures = {
      {"training.svg", iris_transformer::training_figure(h)},
      {"attention.svg", iris_transformer::attention_figure(model, data)},
      {"confusion.svg", iris_transformer::confusion_figure(model, data)}};
  for (const auto& [name, svg] : figures) {
    CHECK(svg.rfind("<svg", 0) == 0);
    if (const char* dir = std::getenv("MICROTORCH_FIGURES_DIR")) mt::write_file(std::string(dir) + "/" + name, svg);
  }
}
