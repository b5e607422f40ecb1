// Rich display for notebooks: the HTML table of a tensor, the SVG heat map of attention
// weights, and the mime bundles xeus-cling asks for.
#include <string>

#include "helpers.hpp"
#include "microtorch/display.hpp"

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

TEST_CASE("display: Heatmap draws one cell per weight, darker for larger, with escaped labels") {
  const mt::Tensor w = mt::tensor({{1.0, 0.0, 0.0}, {0.5, 0.5, 0.0}});
  const display::Heatmap map{w, {"<q0>", "q1"}, {"a&b", "k1", "k2"}, "causal"};
  const std::string s = map.svg();
  INFO(s);
  CHECK(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(s.find("</svg>") == s.size() - 6);
  CHECK(count(s, "<rect") == 6);
  CHECK(s.find("&lt;q0&gt;") != std::string::npos);
  CHECK(s.find("a&amp;b") != std::string::npos);
  CHECK(s.find("<q0>") == std::string::npos);
  CHECK(s.find(">causal</text>") != std::string::npos);
  CHECK(count(s, "fill=\"#08306b\"") == 1);   // the 1.0 cell: darkest
  CHECK(count(s, "fill=\"#f7fbff\"") == 3);   // the three 0.0 cells: white
  CHECK(s.find(">0.50</text>") != std::string::npos);  // values written in small maps
  CHECK(s.find("<title>q1 &#8594; k1: 0.5</title>") != std::string::npos);
}

TEST_CASE("display: Heatmap takes [1, L, S] weights, default labels, and rejects what it cannot draw") {
  const std::string s = display::Heatmap{mt::full({1, 2, 2}, 0.25)}.svg();
  CHECK(count(s, "<rect") == 4);
  CHECK(s.find("<title>1 &#8594; 0: 0.25</title>") != std::string::npos);
  CHECK_THROWS_AS((display::Heatmap{mt::zeros({2, 2, 2})}.svg()), mt::ShapeError);
  CHECK_THROWS_AS((display::Heatmap{mt::zeros({2, 2}), {"only one"}}.svg()), mt::ValueError);
  // 20 x 20: no numbers in the cells, tooltips still there
  const std::string big = display::Heatmap{mt::zeros({20, 20})}.svg();
  CHECK(count(big, "<rect") == 400);
  CHECK(count(big, "text-anchor=\"middle\"") == 0);
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

TEST_CASE("display: LineChart draws the series as one polyline spanning the plot, with its range on the axis") {
  const display::LineChart chart{{4.0, 2.0, 1.0, 0.5}, "loss <curve>"};
  const std::string svg = chart.svg();
  CHECK(svg.find("<polyline") != std::string::npos);
  CHECK(svg.find("loss &lt;curve&gt;") != std::string::npos);
  CHECK(svg.find(">4<") != std::string::npos);    // the top of the y range
  CHECK(svg.find(">0.5<") != std::string::npos);  // the bottom
  // four points: first at the left edge (x = 60) and top, last at the right edge and bottom
  CHECK(svg.find("points=\"60.0,32.0 ") != std::string::npos);  // below the title
  CHECK(svg.find(" 464.0,200.0\"") != std::string::npos);
  const display::LineChart log_chart{{100.0, 10.0, 1.0}, "", "step", "loss", true};
  CHECK(log_chart.svg().find("(log)") != std::string::npos);
  CHECK_THROWS_AS(display::LineChart{{}}.svg(), mt::ValueError);
  CHECK_THROWS_AS((display::LineChart{{1.0, 0.0}, "", "x", "y", true}.svg()), mt::ValueError);
}
