/* The execution interface between generated per-rank code and the runtime: a generated shared
 * library exports flexplan_generated_plan_v1(), and its code hands each rank's program, task by
 * task, to the runtime through a flexplan_program_sink. Plain C, so that a library built by
 * another compiler still loads. `flexplan codegen --target cpp` writes a copy of this file,
 * named flexplan_program.h, beside the code it generates. */
#ifndef FLEXPLAN_PROGRAM_ABI_H
#define FLEXPLAN_PROGRAM_ABI_H

#include <stdint.h>

#define FLEXPLAN_PROGRAM_ABI 4

#ifdef __cplusplus
extern "C" {
#endif

/* One end of a message: the peer, and what names the message on its receiver (codegen::Link):
 * the op's number in the schedule, and a star reduce's source's place among the root's sources
 * (0 elsewhere). */
typedef struct flexplan_link {
  int32_t rank;
  uint64_t message;
  uint32_t source;
} flexplan_link;

/* One rank's part in one op of a step: the fields of codegen::Task (codegen/rank_program.hpp).
 * A chain member has at most one source and one destination; a star root has several of one. */
typedef struct flexplan_task {
  uint32_t op_index;
  uint8_t reduce;         /* 1: a reduce, 0: a broadcast */
  uint8_t add_own;        /* reduce: combine what arrives with this rank's own data */
  uint8_t stage_writes;   /* land the written range in scratch, copy it in when the step ends */
  uint8_t own_from_send;  /* read own data from the send buffer (no earlier step wrote it) */
  uint32_t own_position;  /* add_own: how many sources' data precede own when combining */
  uint32_t source_count, destination_count;
  const flexplan_link* sources;       /* receive each chunk from each, combined in this order */
  const flexplan_link* destinations;  /* send each chunk to each */
  uint64_t unit_begin, unit_end;
  uint64_t max_chunks; /* the most chunks its range is cut into: 2^20, less in a star reduce */
} flexplan_task;

/* Where generated code delivers a program. Calls come in program order: step(s), then that
 * step's copy_in and task calls, ...; copy_at_end calls come last. */
typedef struct flexplan_program_sink {
  void* context;
  void (*step)(void* context, uint32_t step);
  void (*task)(void* context, const flexplan_task* task);
  void (*copy_in)(void* context, uint64_t unit_begin, uint64_t unit_end);
  void (*copy_at_end)(void* context, uint64_t unit_begin, uint64_t unit_end);
} flexplan_program_sink;

typedef struct flexplan_generated_plan {
  uint32_t abi;                  /* FLEXPLAN_PROGRAM_ABI */
  uint64_t plan_hash;            /* ir::plan_fingerprint of the plan */
  int32_t world_size;
  uint32_t schedules;
  const uint32_t* schedule_steps; /* steps of each schedule */
  /* Emits rank `rank`'s program for schedule `schedule`; 0, or -1 when either is out of range. */
  int (*emit)(int32_t rank, uint32_t schedule, const flexplan_program_sink* sink);
} flexplan_generated_plan;

/* The one symbol a generated library exports (visible even when built with hidden visibility). */
#if defined(__GNUC__)
#define FLEXPLAN_EXPORT __attribute__((visibility("default")))
#else
#define FLEXPLAN_EXPORT
#endif
FLEXPLAN_EXPORT const flexplan_generated_plan* flexplan_generated_plan_v1(void);

#ifdef __cplusplus
}  /* extern "C" */

#include <initializer_list>

/* What generated code calls: one line per task. */
namespace flexplan_generated {

enum : unsigned { kAddOwn = 1u, kStaged = 2u, kOwnFromSend = 4u };
inline constexpr int32_t kNone = -1;

struct Emitter {
  const flexplan_program_sink* sink;
  void step(uint32_t s) const { sink->step(sink->context, s); }
  void copy_in(uint64_t begin, uint64_t end) const { sink->copy_in(sink->context, begin, end); }
  void copy_at_end(uint64_t begin, uint64_t end) const { sink->copy_at_end(sink->context, begin, end); }
  /* A chain member: (op, unit range, receive from, send to, flags, the op's number, which names
     both its messages); kNone where it does not receive or send. */
  void reduce(uint32_t op, uint64_t begin, uint64_t end, int32_t from, int32_t to, unsigned flags,
              uint64_t message) const {
    chain(op, 1, begin, end, from, to, flags, message);
  }
  void broadcast(uint32_t op, uint64_t begin, uint64_t end, int32_t from, int32_t to, unsigned flags,
                 uint64_t message) const {
    chain(op, 0, begin, end, from, to, flags, message);
  }
  /* A star's root or a star reduce's member: (op, unit range, flags, own's place among the
     sources, the most chunks of its range, {rank, op number, source's place} of every source,
     then of every destination). */
  void reduce_star(uint32_t op, uint64_t begin, uint64_t end, unsigned flags, uint32_t own_position,
                   uint64_t max_chunks, std::initializer_list<flexplan_link> sources,
                   std::initializer_list<flexplan_link> destinations) const {
    task(op, 1, begin, end, flags, own_position, max_chunks, sources.begin(), static_cast<uint32_t>(sources.size()),
         destinations.begin(), static_cast<uint32_t>(destinations.size()));
  }
  void broadcast_star(uint32_t op, uint64_t begin, uint64_t end, unsigned flags,
                      std::initializer_list<flexplan_link> sources,
                      std::initializer_list<flexplan_link> destinations) const {
    task(op, 0, begin, end, flags, 0, kChainChunks, sources.begin(), static_cast<uint32_t>(sources.size()),
         destinations.begin(), static_cast<uint32_t>(destinations.size()));
  }

 private:
  static constexpr uint64_t kChainChunks = uint64_t{1} << 20;
  void chain(uint32_t op, uint8_t reduce, uint64_t begin, uint64_t end, int32_t from, int32_t to,
             unsigned flags, uint64_t message) const {
    const flexplan_link source{from, message, 0}, destination{to, message, 0};
    /* A chain member adds its own after the partial sum it receives. */
    task(op, reduce, begin, end, flags, (flags & kAddOwn) != 0 ? 1u : 0u, kChainChunks, &source,
         from == kNone ? 0u : 1u, &destination, to == kNone ? 0u : 1u);
  }
  void task(uint32_t op, uint8_t reduce, uint64_t begin, uint64_t end, unsigned flags, uint32_t own_position,
            uint64_t max_chunks, const flexplan_link* sources, uint32_t source_count,
            const flexplan_link* destinations, uint32_t destination_count) const {
    const flexplan_task t{op,
                          reduce,
                          static_cast<uint8_t>((flags & kAddOwn) != 0),
                          static_cast<uint8_t>((flags & kStaged) != 0),
                          static_cast<uint8_t>((flags & kOwnFromSend) != 0),
                          own_position,
                          source_count,
                          destination_count,
                          sources,
                          destinations,
                          begin,
                          end,
                          max_chunks};
    sink->task(sink->context, &t);
  }
};

}  // namespace flexplan_generated
#endif

#endif /* FLEXPLAN_PROGRAM_ABI_H */
