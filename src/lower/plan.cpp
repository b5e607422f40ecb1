// plan_memory — one static arena for a Program, shared by buffers whose lifetimes do not
// overlap. A buffer is live from the first step that touches it (its writer) to the last
// step that reads it, inclusive: kernels never write over their own inputs here, so two
// buffers used by the same step always get disjoint bytes.
//
// Placement is the greedy-by-size heuristic (largest first, each at the lowest 8-byte-aligned
// offset where it overlaps no placed buffer that is live at the same time). It is not always
// optimal, but it is deterministic and on the chains of small tensors these models produce
// it reaches the lower bound: the largest set of simultaneously live buffers.
#include <algorithm>

#include "microtorch/lower/quantize.hpp"

namespace microtorch::lower {

void plan_memory(Program& p) {
  // The steps in the order they run: the inference, then (never at the same time) the
  // training step's lists; a sample's buffers live within one pass of its list.
  std::vector<const Step*> run;
  for (const Step& s : p.steps) run.push_back(&s);
  if (p.training) {
    for (const auto* list : {&p.training->zero, &p.training->sample, &p.training->update}) {
      for (const Step& s : *list) run.push_back(&s);
    }
  }
  for (Buffer& b : p.buffers) b.first_step = b.last_step = -1;
  for (std::size_t s = 0; s < run.size(); ++s) {
    auto touch = [&p, s](std::int64_t id) {
      if (id < 0) return;
      Buffer& b = p.buffer(id);
      const auto i = static_cast<std::int64_t>(s);
      if (b.first_step < 0) b.first_step = i;
      b.last_step = std::max(b.last_step, i);
    };
    for (const Arg& a : run[s]->args) {
      if (a.kind == Arg::Kind::Buffer) touch(a.buffer);
    }
  }
  std::vector<Buffer*> order;
  for (Buffer& b : p.buffers) {
    b.offset = -1;
    if (b.in_arena() && b.first_step >= 0) order.push_back(&b);
  }
  std::stable_sort(order.begin(), order.end(), [](const Buffer* a, const Buffer* b) { return a->bytes() > b->bytes(); });
  auto align = [](std::int64_t n) { return (n + 7) / 8 * 8; };
  std::vector<const Buffer*> placed;
  std::int64_t arena = 0;
  for (Buffer* b : order) {
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;  // [begin, end) bytes of live neighbours
    for (const Buffer* o : placed) {
      if (o->first_step <= b->last_step && b->first_step <= o->last_step) busy.emplace_back(o->offset, o->offset + o->bytes());
    }
    std::sort(busy.begin(), busy.end());
    std::int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (at + b->bytes() <= begin) break;
      at = std::max(at, align(end));
    }
    b->offset = at;
    arena = std::max(arena, align(at + b->bytes()));
    placed.push_back(b);
  }
  p.arena_bytes = arena;
}

}  // namespace microtorch::lower
