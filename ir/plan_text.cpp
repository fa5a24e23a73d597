// The text form: one statement a line, in this order:
//   flexplan-plan 1
//   world_size P
//   topology NAME HASH|-
//   rank I NAME                        (none, or one per rank in order)
//   schedule ALGORITHM COLLECTIVE bytes MIN..MAX|inf units U [root R] [shards [B,E)...]
//     step PHASE level L
//       reduce|broadcast [BEGIN,END) root R group|star M...
// Indentation is cosmetic; `#` starts a comment.
#include "ir/plan_text.hpp"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <optional>

#include "ir/op_text.hpp"
#include "ir/pipeline_form.hpp"
#include "ir/text_lexer.hpp"

namespace flexplan::ir {

namespace {

constexpr int kTextFormatVersion = 1;

using detail::Token;
using detail::TokenLine;

class TextParser {
 public:
  TextParser(std::string_view text, const std::string& source)
      : lines_(detail::tokenize_plan_text(text, source)), source_(source) {}

  Plan run() {
    Plan plan;
    parse_header();
    plan.world_size = parse_world_size();
    parse_topology(plan);
    while (at_keyword("rank")) parse_rank(plan);
    while (line_ < lines_.size()) {
      expect_keyword("schedule", plan.schedules.empty()
                                     ? "a 'rank' or 'schedule' line"
                                     : "a 'schedule', 'step', 'reduce' or 'broadcast' line");
      plan.schedules.push_back(parse_schedule());
    }
    return plan;
  }

 private:
  // --- lines and tokens
  bool at_keyword(std::string_view word) const {
    return line_ < lines_.size() && !lines_[line_].tokens[0].quoted &&
           lines_[line_].tokens[0].text == word;
  }

  [[noreturn]] void fail(const Token& token, const std::string& what) const {
    throw PlanFormatError(fmt::format("{}:{}:{}: {}", source_, token.line, token.column, what));
  }
  [[noreturn]] void fail_at_end(const std::string& what) const {
    const size_t line = lines_.empty() ? 1 : lines_.back().line + 1;
    throw PlanFormatError(fmt::format("{}:{}:1: {}", source_, line, what));
  }

  // Starts the next line, which must begin with `word`.
  void expect_keyword(std::string_view word, std::string_view what) {
    if (line_ >= lines_.size())
      fail_at_end(fmt::format("unexpected end of text, expected {}", what));
    if (!at_keyword(word))
      fail(lines_[line_].tokens[0],
           fmt::format("expected {}, found '{}'", what, lines_[line_].tokens[0].text));
    token_ = 1;
  }

  const Token& next(std::string_view what) {
    const TokenLine& line = lines_[line_];
    if (token_ >= line.tokens.size()) {
      const Token& last = line.tokens.back();
      Token end{"", false, last.line, last.column + last.text.size() + (last.quoted ? 2 : 0)};
      fail(end, fmt::format("expected {} at the end of the line", what));
    }
    return line.tokens[token_++];
  }
  bool has_more() const { return token_ < lines_[line_].tokens.size(); }
  const Token& peek() const { return lines_[line_].tokens[token_]; }
  void end_line() {
    if (has_more())
      fail(lines_[line_].tokens[token_], fmt::format("unexpected '{}' at the end of the line",
                                                     lines_[line_].tokens[token_].text));
    ++line_;
  }

  const Token& word(std::string_view expected) {
    const Token& token = next(fmt::format("'{}'", expected));
    if (token.quoted || token.text != expected)
      fail(token, fmt::format("expected '{}', found '{}'", expected, token.text));
    return token;
  }

  template <typename Int>
  static bool parse_int(std::string_view text, Int& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() && !text.empty() &&
           text[0] != '+';
  }
  template <typename Int>
  Int number(const Token& token, std::string_view what, Int min = std::numeric_limits<Int>::min()) {
    Int value{};
    if (token.quoted || !parse_int(token.text, value) || value < min) {
      const bool bounded = min != std::numeric_limits<Int>::min();
      fail(token, fmt::format("{} must be an integer{}, found '{}'", what,
                              bounded ? fmt::format(" of at least {}", min) : "", token.text));
    }
    return value;
  }
  template <typename Int>
  Int number(std::string_view what, Int min = std::numeric_limits<Int>::min()) {
    return number<Int>(next(what), what, min);
  }

  template <typename Enum>
  Enum name_of(Enum (*from_string)(std::string_view), std::string_view what) {
    const Token& token = next(what);
    try {
      return from_string(token.text);
    } catch (const std::invalid_argument& e) {
      fail(token, e.what());
    }
  }

  // --- statements
  void parse_header() {
    expect_keyword("flexplan-plan", "the header 'flexplan-plan 1'");
    const Token& version = next("the text format version");
    const int value = number<int>(version, "the text format version", 0);
    if (value != kTextFormatVersion) {
      fail(version,
           fmt::format("text format version {} is not supported (this flexplan reads version {})",
                       value, kTextFormatVersion));
    }
    end_line();
  }

  int32_t parse_world_size() {
    expect_keyword("world_size", "a 'world_size' line");
    const auto value = number<int32_t>("world size", 1);
    end_line();
    return value;
  }

  void parse_topology(Plan& plan) {
    expect_keyword("topology", "a 'topology' line");
    plan.topology_name = next("the topology name").text;
    const Token& hash = next("the topology hash (or '-')");
    if (hash.quoted || hash.text != "-") plan.topology_hash = hash.text;
    end_line();
  }

  void parse_rank(Plan& plan) {
    expect_keyword("rank", "a 'rank' line");
    const Token& index = next("the rank");
    const auto rank = number<int64_t>(index, "the rank", 0);
    if (rank != static_cast<int64_t>(plan.rank_names.size())) {
      fail(index, fmt::format("expected rank {} next (rank lines list the ranks in order)",
                              plan.rank_names.size()));
    }
    if (rank >= plan.world_size)
      fail(index, fmt::format("rank {} is not below the world size {}", rank, plan.world_size));
    plan.rank_names.push_back(next("the rank's name").text);
    end_line();
  }

  Schedule parse_schedule() {
    Schedule schedule;
    schedule.algorithm = next("the algorithm name").text;
    schedule.collective = name_of(collective_from_string, "the collective");
    word("bytes");
    parse_byte_range(next("the message size range MIN..MAX"), schedule);
    word("units");
    schedule.units = number<uint64_t>("units");
    // The contract's fields (collective_contract.hpp); the verifier says which belong.
    if (has_more() && peek().text == "root") {
      word("root");
      schedule.root = number<int32_t>("the root", 0);
    }
    if (has_more() && peek().text == "shards") {
      word("shards");
      while (has_more()) {
        UnitRange shard;
        parse_unit_range(next("a shard [BEGIN,END)"), shard.begin, shard.end);
        schedule.shards.push_back(shard);
      }
    }
    end_line();
    while (at_keyword("step")) schedule.steps.push_back(parse_step());
    return schedule;
  }

  void parse_byte_range(const Token& token, Schedule& schedule) {
    const size_t dots = token.text.find("..");
    if (token.quoted || dots == std::string::npos)
      fail(token, fmt::format("expected MIN..MAX bytes, found '{}'", token.text));
    const std::string_view text = token.text;
    const std::string_view min = text.substr(0, dots), max = text.substr(dots + 2);
    if (!parse_int(min, schedule.min_bytes))
      fail(token, fmt::format("bad minimum '{}' in the byte range", min));
    if (max == "inf") return;
    uint64_t value = 0;
    if (!parse_int(max, value))
      fail(token, fmt::format("bad maximum '{}' in the byte range (a number or 'inf')", max));
    schedule.max_bytes = value;
  }

  Step parse_step() {
    expect_keyword("step", "a 'step' line");
    Step step;
    step.phase = name_of(phase_from_string, "the phase");
    word("level");
    step.level = number<int32_t>("the level");
    end_line();
    while (at_keyword("reduce") || at_keyword("broadcast")) step.ops.push_back(parse_op());
    return step;
  }

  Op parse_op() {
    Op op;
    op.kind = op_kind_from_string(lines_[line_].tokens[0].text);
    token_ = 1;
    parse_unit_range(next("the unit range [BEGIN,END)"), op.begin, op.end);
    word("root");
    op.root = number<int32_t>("the root", 0);
    const Token& shape = next("'group' (a chain) or 'star'");
    if (shape.text == "star")
      op.shape = OpShape::Star;
    else if (shape.text != "group")
      fail(shape, fmt::format("expected 'group' (a chain) or 'star', found '{}'", shape.text));
    // An empty group, or units = 0 above, parses: the text form holds whatever the other forms
    // hold, and the verifier says what is wrong with it.
    while (has_more()) op.group.push_back(number<int32_t>("a group member", 0));
    end_line();
    return op;
  }

  void parse_unit_range(const Token& token, uint64_t& begin, uint64_t& end) {
    const std::string_view text = token.text;
    const size_t comma = text.find(',');
    if (token.quoted || text.size() < 5 || text.front() != '[' || text.back() != ')' ||
        comma == std::string_view::npos || !parse_int(text.substr(1, comma - 1), begin) ||
        !parse_int(text.substr(comma + 1, text.size() - comma - 2), end)) {
      fail(token, fmt::format("expected a unit range [BEGIN,END), found '{}'", text));
    }
    // Every form codes a range as its begin and length (plan.bin), so none holds one that ends
    // before it begins; an empty one is the verifier's to refuse.
    if (end < begin)
      fail(token, fmt::format("the unit range {} ends before it begins", text));
  }

  std::vector<TokenLine> lines_;
  const std::string& source_;
  size_t line_ = 0;   // index into lines_
  size_t token_ = 0;  // index into the current line's tokens
};

}  // namespace

std::string print_plan_text(const Plan& plan) {
  // A bare "-" means "no hash", so a hash that is the text "-" must be written quoted.
  const std::string hash = plan.topology_hash.empty() ? "-"
                           : plan.topology_hash == "-"
                               ? detail::quote(plan.topology_hash)
                               : detail::quote_if_needed(plan.topology_hash);
  std::string out = fmt::format("flexplan-plan {}\nworld_size {}\ntopology {} {}\n",
                                kTextFormatVersion, plan.world_size,
                                detail::quote(plan.topology_name), hash);
  for (size_t rank = 0; rank < plan.rank_names.size(); ++rank) {
    fmt::format_to(std::back_inserter(out), "rank {} {}\n", rank,
                   detail::quote(plan.rank_names[rank]));
  }
  for (const Schedule& held : plan.schedules) {
    // Written whole: the text forms have no compact pipeline (pipeline_form.hpp).
    std::optional<Schedule> whole;
    const Schedule& schedule = held.slices == 1 ? held : whole.emplace(materialize(held));
    const std::string max = schedule.max_bytes ? std::to_string(*schedule.max_bytes) : "inf";
    fmt::format_to(std::back_inserter(out), "schedule {} {} bytes {}..{} units {}",
                   detail::quote_if_needed(schedule.algorithm), to_string(schedule.collective),
                   schedule.min_bytes, max, schedule.units);
    if (schedule.root != 0 || has_root(schedule.collective))
      fmt::format_to(std::back_inserter(out), " root {}", schedule.root);
    if (!schedule.shards.empty()) {
      out += " shards";
      for (const UnitRange& shard : schedule.shards)
        fmt::format_to(std::back_inserter(out), " [{},{})", shard.begin, shard.end);
    }
    out += '\n';
    for (const Step& step : schedule.steps) {
      fmt::format_to(std::back_inserter(out), "  step {} level {}\n", to_string(step.phase),
                     step.level);
      for (const Op& op : step.ops)
        fmt::format_to(std::back_inserter(out), "    {}\n", format_op(op));
    }
  }
  return out;
}

Plan parse_plan_text(std::string_view text, const std::string& source) {
  return TextParser(text, source).run();
}

}  // namespace flexplan::ir
