// The error every importer of a cluster description throws (Slurm topology.conf, NCCL XML,
// nvidia-smi text, hostfiles): it names the file and line. A TopologyError, so that flexplan
// exits 2 with it like any other malformed topology.
#pragma once

#include <string>

#include "topology/topology.hpp"

namespace flexplan {

class ImportError : public TopologyError {
 public:
  // "FILE:LINE: what", or "FILE: what" where no line applies (line 0).
  ImportError(const std::string& file, int line, const std::string& what)
      : TopologyError(line > 0 ? file + ":" + std::to_string(line) : file, what),
        file_(file),
        line_(line) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string file_;
  int line_;
};

}  // namespace flexplan
