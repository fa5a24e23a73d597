#include "bench/flexbench/bench_args.hpp"

#include <cctype>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "topology/sizes.hpp"

namespace flexplan::bench {

uint64_t parse_size(const std::string& text, std::string_view option, bool print) {
  std::string warning;
  uint64_t bytes = 0;
  try {
    bytes = flexplan::parse_size(text, &warning);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", option, e.what()));
  }
  if (print && !warning.empty()) fmt::print(stderr, "flexbench: warning: {}: {}\n", option, warning);
  return bytes;
}

std::optional<DataType> parse_dtype(const std::string& name, const std::string& old_flag_value,
                                    bool print) {
  const std::string& text = old_flag_value.empty() ? name : old_flag_value;
  if (print && !old_flag_value.empty())
    fmt::print(stderr, "flexbench: warning: -d/--datatype is deprecated: give -t/--dtype, as flexplan predict does\n");
  const auto type = parse_data_type(text);
  if (type && print && to_string(*type) != text)
    fmt::print(stderr, "flexbench: warning: data type '{}' is now spelled '{}'\n", text, to_string(*type));
  return type;
}

std::optional<BenchArgs> parse_args(int argc, char** argv, bool print, int& exit_code) {
  BenchArgs args;
  std::string min_text = "8", max_text = "128M", type_text = "float32", old_type_text, op_text = "sum";
  std::string collective_text = "allreduce";
  int check = 1;
  int mpi = 1;
  CLI::App app{"flexbench: collective timing of a flexplan plan against MPI's (MPI_Allreduce, "
               "MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Reduce)"};
  app.add_option("plan", args.plan_path, "plan.bin written by flexplan")->required();
  app.failure_message([](const CLI::App*, const CLI::Error& e) {  // prefixed as flexplan's errors
    return fmt::format("flexbench: error: {}\nRun with --help for more information.\n", e.what());
  });
  app.add_option("--collective", collective_text,
                 "allreduce reduce_scatter allgather broadcast reduce (sizes are the whole buffer's, as "
                 "nccl-tests: an all-gather's receive, a reduce-scatter's send)");
  app.add_option("-r,--root", args.root, "broadcast's and reduce's root rank")->check(CLI::NonNegativeNumber);
  app.add_option("-b,--minbytes", min_text, "smallest message size (8, 64K, 1M, ...)");
  app.add_option("-e,--maxbytes", max_text, "largest message size");
  app.add_option("-f,--stepfactor", args.factor, "size multiplier between rows")->check(CLI::Range(2, 1 << 20));
  // One name: flexbench times one schedule per size (the plan's, or this algorithm's at every
  // size); --algorithms is the flexplan commands' spelling of the same flag.
  app.add_option("-a,--algorithm,--algorithms", args.algorithm,
                 "run the plan's schedule of this one algorithm at every size (flexreduce@4)")
      ->check(CLI::Validator(
          [](const std::string& name) {
            return name.find(',') == std::string::npos
                       ? std::string()
                       : "flexbench runs one algorithm's schedule at every size: give one name, not the list '" +
                             name + "'";
          },
          "NAME"));
  app.add_option("-n,--iters", args.iterations, "timed iterations per size")->check(CLI::Range(1, 1 << 24));
  app.add_option("-m,--agg_iters", args.agg_iters,
                 "calls back to back in each timed iteration, its time divided by them (as nccl-tests' -m): "
                 "small sizes then time the calls, not the spread of the ranks' exits from the barrier before; "
                 "host buffers only")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", args.warmup, "untimed iterations per size")->check(CLI::Range(0, 1 << 24));
  app.add_option("-t,--dtype", type_text, "float32 float64 float16 bfloat16 int32 int64 uint8");
  app.add_option("-d,--datatype", old_type_text, "deprecated: -t/--dtype");
  app.add_option("-o,--op", op_text, "sum prod min max avg");
  auto* blocking = app.add_flag("--blocking", args.blocking, "sleep in ucp_worker_wait instead of busy-polling");
  app.add_flag("--polling", args.polling,
               "busy-poll even where ranks outnumber this host's cores (blocking is then the default)")
      ->excludes(blocking);
  app.add_option("-c,--check", check, "check results (1) or not (0)")->check(CLI::Range(0, 1));
  app.add_option("--mpi", mpi, "also time MPI's collective at each size (1) or not (0)")->check(CLI::Range(0, 1));
  app.add_option("--json", args.json_path, "also write one JSON record per size to FILE");
  auto* device = app.add_flag("--device", args.device,
                              "device buffers through the GPU backend (NCCL), out-of-place and in-place columns");
  app.add_flag("--staged", args.staged,
               "with --device: the UCX path, staged through pinned host memory, instead of NCCL (ranks may share a GPU)")
      ->needs(device);
  try {
    app.parse(argc, argv);
    if (args.device && args.agg_iters > 1)
      throw std::invalid_argument("-m/--agg_iters: not with --device (a device timing is one call on its stream)");
    args.min_bytes = parse_size(min_text, "-b/--minbytes", print);
    args.max_bytes = parse_size(max_text, "-e/--maxbytes", print);
    if (args.min_bytes > args.max_bytes) {
      throw std::invalid_argument(fmt::format("-b {} is larger than -e {}", min_text, max_text));
    }
    const auto type = parse_dtype(type_text, old_type_text, print);
    if (!type)
      throw std::invalid_argument(fmt::format("-t {}: unknown data type (float32 float64 float16 bfloat16 int32 int64 uint8)",
                                              old_type_text.empty() ? type_text : old_type_text));
    const auto op = parse_reduce_op(op_text);
    if (!op) throw std::invalid_argument(fmt::format("-o {}: unknown reduction", op_text));
    try {
      args.collective = ir::collective_from_string(collective_text);
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(fmt::format(
          "--collective {}: not one of allreduce, reduce_scatter, allgather, broadcast, reduce", collective_text));
    }
    args.type = *type;
    args.op = *op;
    args.check = check == 1;
    args.mpi = mpi == 1;
  } catch (const CLI::ParseError& e) {
    exit_code = e.get_exit_code() == 0 ? 0 : 2;
    if (print) app.exit(e);
    return std::nullopt;
  } catch (const std::invalid_argument& e) {
    exit_code = 2;
    if (print) fmt::print(stderr, "flexbench: error: {}\n", e.what());
    return std::nullopt;
  }
  return args;
}

}  // namespace flexplan::bench
