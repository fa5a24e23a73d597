// Hostile topology text (issue 39): raw bytes never reach a message, and names cannot hold
// bidirectional controls or other characters that would make printed output lie.
#include <string>

#include <gtest/gtest.h>

#include "topology/topology.hpp"

namespace flexplan {
namespace {

const std::string kLink = R"("link": {"bandwidth": "1 GB/s"})";

std::string learner(const std::string& name) { return R"({"name": ")" + name + R"(", )" + kLink + "}"; }

std::string with_children(const std::string& children) {
  return R"({"name": "t", "root": {"name": "s", "children": [)" + children + "]}}";
}

// The error parse_topology throws for `json`, or a failure when it accepts it.
TopologyError error_of(const std::string& json) {
  try {
    parse_topology(json, "test.json");
  } catch (const TopologyError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted";
  return TopologyError("", "");
}

bool has_raw_byte_at_or_above(const std::string& text, unsigned char lowest) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= lowest) return true;
  return false;
}

TEST(TopologyHostileText, InvalidUtf8IsEscapedInSyntaxErrors) {
  for (const std::string& json :
       {std::string("{\"name\": \"t\xff\xfe\", \"root\": {}}"),
        std::string("{\"name\": \"t\", \"root\": \xc3\x28}"),
        std::string("{\"name\": \"t\", \"ro\xe2\x80\xaeot\": \xff}"),
        std::string("{\"name\": \"t\", \"root\": \"\x1b[31m\xed\xa0\x80\"}")}) {
    SCOPED_TRACE(json);
    const TopologyError e = error_of(json);
    const std::string message = e.what();
    EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
    EXPECT_FALSE(has_raw_byte_at_or_above(message, 0x80)) << message;
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  }
  const std::string message = error_of("{\"name\": \"t\xff\"}").what();
  EXPECT_NE(message.find("\\xFF"), std::string::npos) << message;
}

// Keys are input as well: unknown and repeated keys are quoted escaped, in the message and in
// the location.
TEST(TopologyHostileText, KeysAreEscapedInMessagesAndLocations) {
  const TopologyError unknown =
      error_of(R"({"name": "t", "root": {"name": "s", "chi\u202eldren": []}})");
  EXPECT_NE(std::string(unknown.what()).find("unknown field \"chi\\u202Eldren\""), std::string::npos)
      << unknown.what();
  EXPECT_FALSE(has_raw_byte_at_or_above(unknown.what(), 0x80)) << unknown.what();
  const TopologyError twice =
      error_of(R"({"name": "t", "root": {"name": "s", "a\u001b": 1, "a\u001b": 2}})");
  EXPECT_EQ(twice.where(), "root.a\\x1B") << twice.what();
  EXPECT_EQ(std::string(twice.what()).find('\x1b'), std::string::npos) << twice.what();
}

// `flexplan inspect` and `topo show` print names as they are: a right-to-left override in one
// would make the rest of its line read backwards ("gpu\u202e1uqg" shows as "gpugpu1").
TEST(TopologyHostileText, NamesWithBidirectionalControlsAreRefused) {
  struct Case {
    std::string escaped_in_json;  // as written in the JSON
    std::string code_point;       // what the message names
  };
  const Case cases[] = {
      {"a\\u202eb", "U+202E (RIGHT-TO-LEFT OVERRIDE)"},
      {"a\\u202ab", "U+202A (LEFT-TO-RIGHT EMBEDDING)"},
      {"a\\u202db", "U+202D (LEFT-TO-RIGHT OVERRIDE)"},
      {"a\\u2066b", "U+2066 (LEFT-TO-RIGHT ISOLATE)"},
      {"a\\u2069b", "U+2069 (POP DIRECTIONAL ISOLATE)"},
      {"a\\u200fb", "U+200F (RIGHT-TO-LEFT MARK)"},
      {"a\\u2028b", "line separator U+2028"},
      {"a\\u0085b", "control character U+0085"},
      {"a\\u007fb", "control character U+007F"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.escaped_in_json);
    const TopologyError e = error_of(with_children(learner("x") + "," + learner(c.escaped_in_json)));
    EXPECT_EQ(e.where(), "root.children[1].name") << e.what();
    EXPECT_NE(std::string(e.what()).find(c.code_point), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("names must be printable"), std::string::npos) << e.what();
    // The name is quoted escaped, so the message itself cannot be reordered.
    for (const char* raw : {"\u202e", "\u202a", "\u202d", "\u2066", "\u2069", "\u200f", "\u2028",
                            "\u0085", "\x7f"})
      EXPECT_EQ(std::string(e.what()).find(raw), std::string::npos) << e.what();
  }
  const TopologyError top = error_of(R"({"name": "t\u2067", "root": {"name": "s", "children": [)" +
                                     learner("a") + "," + learner("b") + "]}}");
  EXPECT_EQ(top.where(), "name") << top.what();
  EXPECT_NE(std::string(top.what()).find("U+2067 (RIGHT-TO-LEFT ISOLATE)"), std::string::npos)
      << top.what();
  const TopologyError deep = error_of(
      with_children(R"({"name": "m", )" + kLink + R"(, "children": [)" + learner("g") + "," +
                    learner("h\\u202e") + "]}," + learner("b")));
  EXPECT_EQ(deep.where(), "root.children[0].children[1].name") << deep.what();
}

// Other scripts, right-to-left ones included, are names like any other.
TEST(TopologyHostileText, PrintableUnicodeNamesAreAccepted) {
  const Topology t = parse_topology(
      with_children(learner("gpu-\u00e9") + "," + learner("\u8282\u70b9") + "," +
                    learner("\u05e9\u05e8\u05ea")));
  EXPECT_EQ(t.num_learners(), 3);
  EXPECT_EQ(t.full_name(t.learner_node(1)), "s/\u8282\u70b9");
}

}  // namespace
}  // namespace flexplan
