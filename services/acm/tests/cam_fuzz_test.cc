// A seeded mutation fuzzer for the CAM parser: thousands of corrupted
// variants of every example must each parse or be refused with
// INVALID_ARGUMENT, never crash, hang or answer anything else.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "acm/core/cam_parser.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;

TEST_CASE("mutated CAMs parse or are refused and never crash") {
  std::vector<std::string> seeds;
  for (const auto& entry : fs::directory_iterator(ACM_EXAMPLES_DIR)) {
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  REQUIRE_FALSE(seeds.empty());
  const std::string alphabet = "{}[]:,-&*!|>'\"#%@ \n\tab01eE.mMiKs";
  std::mt19937 rng(20261122);
  int ok = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string doc = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      size_t at = rng() % doc.size();
      switch (rng() % 4) {
        case 0:
          doc[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          doc.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          doc.erase(at, 1 + rng() % 16);
          break;
        default: {  // duplicate a slice (repeats keys, lines, anchors)
          size_t len = std::min<size_t>(doc.size() - at, 1 + rng() % 64);
          doc.insert(rng() % doc.size(), doc.substr(at, len));
        }
      }
    }
    absl::StatusOr<ParsedCam> cam = ParseCam(doc);
    if (cam.ok()) {
      ++ok;
    } else {
      INFO(doc);
      REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
      ++refused;
    }
  }
  REQUIRE(ok + refused == 3000);
  REQUIRE(refused > 0);
}

}  // namespace
}  // namespace codeco::acm
