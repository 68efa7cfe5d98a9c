// Checkpoint archives as files: a checkpoint writes a real tar that `tar`
// can list, a copy of it (as the checkpointer would extract from a pulled
// image) restores the container in another cluster, and foreign files are
// refused.
#include "file_archive_store.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "codeco/common/clock.h"
#include "emulated_cluster.h"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

TEST_CASE("a file archive restores in another cluster from a copy of the tar") {
  fs::path dir = fs::temp_directory_path() / ("codef_archive_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  FileCheckpointArchiveStore store(dir.string());
  SimulatedClock clock(absl::FromUnixSeconds(1'000'000));
  EmulatedClusterOptions a_options;
  a_options.name = "a";
  a_options.pod_start_delay = absl::ZeroDuration();
  EmulatedClusterOptions b_options = a_options;
  b_options.name = "b";
  EmulatedCluster a(a_options, clock, &store, nullptr);
  EmulatedCluster b(b_options, clock, &store, nullptr);
  NodeSpec node;
  node.name = "n";
  node.cpu_millicores = 1000;
  node.memory_bytes = 1 << 30;
  REQUIRE(a.AddNode(node).ok());
  REQUIRE(b.AddNode(node).ok());

  codeco::lms::v1::Pod pod;
  pod.set_name("redis");
  pod.set_node_name("n");
  pod.add_containers()->set_name("main");
  (*pod.mutable_annotations())[kStateAnnotation] = "keys=1000";
  REQUIRE(a.CreatePod(pod, "").ok());
  clock.Advance(absl::Seconds(90));
  a.AdvanceTo(clock.Now());
  codeco::lms::v1::CheckpointContainerRequest checkpoint;
  checkpoint.set_pod("redis");
  checkpoint.set_container("main");
  auto dumped = a.CheckpointContainer(checkpoint);
  REQUIRE(dumped.ok());
  REQUIRE(absl::StartsWith(dumped->archive_path(), (dir / "checkpoints" / "a").string()));
  REQUIRE(fs::is_regular_file(dumped->archive_path()));
  REQUIRE(fs::file_size(dumped->archive_path()) % 512 == 0);
  // A real tar: the system's tar lists our member.
  std::string list =
      "tar -tf '" + dumped->archive_path() + "' > '" + (dir / "list.txt").string() + "'";
  REQUIRE(std::system(list.c_str()) == 0);
  std::ifstream listed(dir / "list.txt");
  std::string member;
  std::getline(listed, member);
  REQUIRE(member == "codef-checkpoint.json");

  fs::path copy = dir / "pulled" / "checkpoint.tar";
  fs::create_directories(copy.parent_path());
  fs::copy_file(dumped->archive_path(), copy);
  codeco::lms::v1::RestoreContainerRequest restore;
  restore.mutable_pod()->set_name("redis");
  restore.mutable_pod()->set_node_name("n");
  restore.mutable_pod()->add_containers()->set_name("main");
  restore.set_container("main");
  restore.set_archive_path(copy.string());
  auto restored = b.RestoreContainer(restore);
  INFO(restored.status().ToString());
  REQUIRE(restored.ok());
  REQUIRE(restored->pod().annotations().at(kStateAnnotation) == "keys=1000");
  REQUIRE(restored->pod().annotations().at(kRestoredProgressAnnotation) == "90s");
  REQUIRE(restored->pod().annotations().at(kRestoredFromAnnotation) == dumped->archive_path());

  // The image reference the emulator registered resolves too.
  auto by_image = store.Get("codef.local/checkpoints/a/redis-main:1");
  REQUIRE(by_image.ok());
  REQUIRE(by_image->state == "keys=1000");

  // Foreign files and unknown names are refused.
  std::ofstream(dir / "junk.tar") << std::string(2048, 'x');
  REQUIRE(store.Get((dir / "junk.tar").string()).status().code() ==
          absl::StatusCode::kInvalidArgument);
  REQUIRE(store.Get((dir / "missing.tar").string()).status().code() == absl::StatusCode::kNotFound);
  REQUIRE(store.Get("relative.tar").status().code() == absl::StatusCode::kNotFound);
  std::string bytes = EncodeCheckpointArchive(*by_image);
  bytes[600] ^= 0x20;  // still a tar, but the JSON is damaged or changed
  auto damaged = DecodeCheckpointArchive(bytes);
  REQUIRE((!damaged.ok() || damaged->state != by_image->state || damaged->pod != "redis" ||
           damaged->cluster != "a" || damaged->node != "n"));
  bytes = EncodeCheckpointArchive(*by_image);
  bytes[10] = 'X';  // member name no longer ours
  REQUIRE_FALSE(DecodeCheckpointArchive(bytes).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace codeco::codef
