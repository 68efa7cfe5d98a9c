// The shaping core under a SimulatedClock: latency per chunk, in-order
// delivery when conditions change, token-bucket serialization delay, loss as
// seeded retransmission delay, and cut/heal.
#include "tools/codef/relay/shaped_pipe.h"

#include <catch2/catch.hpp>

namespace codeco::codef {
namespace {

using absl::Milliseconds;

struct Fixture {
  Fixture() {
    REQUIRE(links.AddCluster("a", "127.0.2.1").ok());
    REQUIRE(links.AddCluster("b", "127.0.3.1").ok());
  }
  void Set(const LinkConditions& forward, const LinkConditions& reverse = {}) {
    REQUIRE(links.SetLink("a", "b", forward).ok());
    REQUIRE(links.SetLink("b", "a", reverse).ok());
  }
  std::unique_ptr<ShapedPipe> Pipe(uint64_t seed = 7, ShapingOptions options = {}) {
    return std::make_unique<ShapedPipe>(links, "a", "b", clock, seed, options);
  }
  absl::Duration SinceStart(absl::Time t) const { return t - start; }

  LinkTable links;
  const absl::Time start = absl::FromUnixSeconds(1000);
  SimulatedClock clock{start};
};

std::string Joined(const std::vector<Chunk>& chunks) {
  std::string out;
  for (const Chunk& chunk : chunks) out += chunk.data;
  return out;
}

TEST_CASE("each chunk is released one latency after it arrived") {
  Fixture f;
  f.Set({.one_way_latency_ns = 10'000'000});
  auto pipe = f.Pipe();
  REQUIRE(pipe->NextRelease() == absl::InfiniteFuture());
  pipe->Push("hello");
  f.clock.Advance(Milliseconds(1));
  pipe->Push("world");
  REQUIRE(pipe->buffered_bytes() == 10);
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(10));

  f.clock.Advance(Milliseconds(8));  // t = 9 ms
  REQUIRE(pipe->PopDue().empty());
  f.clock.Advance(Milliseconds(1));  // t = 10 ms
  REQUIRE(Joined(pipe->PopDue()) == "hello");
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(11));
  f.clock.Advance(Milliseconds(1));
  REQUIRE(Joined(pipe->PopDue()) == "world");
  REQUIRE(pipe->empty());
  REQUIRE(pipe->buffered_bytes() == 0);
}

TEST_CASE("a latency change applies to later chunks and keeps the stream in order") {
  Fixture f;
  f.Set({.one_way_latency_ns = 10'000'000});
  auto pipe = f.Pipe();
  pipe->Push("first");
  f.Set({.one_way_latency_ns = 1'000'000});
  f.clock.Advance(Milliseconds(1));
  pipe->Push("second");  // alone it would be due at 2 ms; it may not pass "first"
  f.clock.Advance(Milliseconds(2));
  REQUIRE(pipe->PopDue().empty());
  f.clock.Advance(Milliseconds(7));  // t = 10 ms
  REQUIRE(Joined(pipe->PopDue()) == "firstsecond");
  pipe->Push("third");  // now at the new latency
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(11));
}

TEST_CASE("the token bucket adds serialization delay at the bandwidth cap") {
  Fixture f;
  // 8 Mbps = 1000 bytes per millisecond; bucket depth 1000 bytes.
  f.Set({.one_way_latency_ns = 5'000'000, .bandwidth_bps = 8'000'000});
  auto pipe = f.Pipe(7, {.burst_bytes = 1000});
  pipe->Push(std::string(1000, 'a'));  // fits the full bucket: no wait
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(5));
  pipe->Push(std::string(4000, 'b'));  // waits 4 ms for tokens
  pipe->Push(std::string(2000, 'c'));  // queued behind: 2 ms more
  f.clock.Advance(Milliseconds(5));
  REQUIRE(pipe->PopDue().size() == 1);
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(9));
  f.clock.Advance(Milliseconds(4));
  REQUIRE(pipe->PopDue().size() == 1);
  REQUIRE(f.SinceStart(pipe->NextRelease()) == Milliseconds(11));
  f.clock.Advance(Milliseconds(2));
  REQUIRE(pipe->PopDue().size() == 1);

  // After an idle second the bucket is full again (but never deeper).
  f.clock.Advance(absl::Seconds(1));
  const absl::Time now = f.clock.Now();
  pipe->Push(std::string(1000, 'd'));
  REQUIRE(pipe->NextRelease() - now == Milliseconds(5));
  pipe->Push(std::string(1000, 'e'));
  REQUIRE(pipe->NextRelease() - now == Milliseconds(5));
  f.clock.Advance(Milliseconds(5));
  REQUIRE(pipe->PopDue().size() == 1);
  REQUIRE(pipe->NextRelease() - now == Milliseconds(6));
}

TEST_CASE("token bucket alone: unlimited rate never delays departures stay in order") {
  TokenBucket bucket(0);
  const absl::Time t0 = absl::FromUnixSeconds(10);
  REQUIRE(bucket.Depart(1'000'000, t0, 0) == t0);
  REQUIRE(bucket.Depart(125, t0, 1000) == t0 + absl::Seconds(1));  // 1000 bits at 1 kbps
  REQUIRE(bucket.Depart(125, t0, 1000) == t0 + absl::Seconds(2));
  REQUIRE(bucket.Depart(1, t0, 0) == t0 + absl::Seconds(2));  // never before the previous
}

TEST_CASE("loss holds a chunk back a retransmission timeout drawn from the seed") {
  Fixture f;
  // RTT 20 ms, so the timeout is the 200 ms floor.
  f.Set({.one_way_latency_ns = 10'000'000, .loss = 1.0}, {.one_way_latency_ns = 10'000'000});
  auto always = f.Pipe(7, {.max_retransmissions = 1});
  always->Push("x");
  REQUIRE(f.SinceStart(always->NextRelease()) == Milliseconds(210));
  auto twice = f.Pipe(7, {.max_retransmissions = 2});
  twice->Push("x");
  REQUIRE(f.SinceStart(twice->NextRelease()) == Milliseconds(10 + 200 + 400));

  // With a long RTT the timeout is two RTTs.
  f.Set({.one_way_latency_ns = 150'000'000, .loss = 1.0}, {.one_way_latency_ns = 150'000'000});
  auto slow = f.Pipe(7, {.max_retransmissions = 1});
  slow->Push("x");
  REQUIRE(f.SinceStart(slow->NextRelease()) == Milliseconds(150 + 600));

  // 30 % loss: about 30 % of chunks are late, and the same seed gives the same draws.
  f.Set({.one_way_latency_ns = 10'000'000, .loss = 0.3}, {.one_way_latency_ns = 10'000'000});
  auto a = f.Pipe(42, {.max_retransmissions = 1});
  auto b = f.Pipe(42, {.max_retransmissions = 1});
  auto c = f.Pipe(43, {.max_retransmissions = 1});
  int late = 0;
  int differs_from_other_seed = 0;
  constexpr int kChunks = 2000;
  for (int i = 0; i < kChunks; ++i) {
    const absl::Time now = f.clock.Now();
    a->Push("x");
    b->Push("x");
    c->Push("x");
    const absl::Duration delay = a->NextRelease() - now;
    REQUIRE((delay == Milliseconds(10) || delay == Milliseconds(210)));
    REQUIRE(b->NextRelease() - now == delay);
    if (delay > Milliseconds(10)) ++late;
    if (c->NextRelease() - now != delay) ++differs_from_other_seed;
    f.clock.Advance(Milliseconds(300));  // every chunk is out before the next
    REQUIRE(a->PopDue().size() == 1);
    REQUIRE(b->PopDue().size() == 1);
    REQUIRE(c->PopDue().size() == 1);
  }
  REQUIRE(late > kChunks * 0.25);
  REQUIRE(late < kChunks * 0.35);
  REQUIRE(differs_from_other_seed > 0);
}

TEST_CASE("a cut link holds everything - healing resumes delivery") {
  Fixture f;
  f.Set({.one_way_latency_ns = 10'000'000});
  auto pipe = f.Pipe();
  pipe->Push("before");  // due at 10 ms
  f.Set({.one_way_latency_ns = 10'000'000, .cut = true});
  pipe->Push("during");
  pipe->PushEndOfStream();
  f.clock.Advance(absl::Seconds(5));
  REQUIRE(pipe->NextRelease() == absl::InfiniteFuture());
  REQUIRE(pipe->PopDue().empty());

  f.Set({.one_way_latency_ns = 10'000'000});  // heal at t = 5 s
  const absl::Time healed = f.clock.Now();
  std::vector<Chunk> out = pipe->PopDue();  // the overdue chunk goes at once
  REQUIRE(Joined(out) == "before");
  // Held chunks are sent from the heal time.
  REQUIRE(pipe->NextRelease() - healed == Milliseconds(10));
  f.clock.Advance(Milliseconds(10));
  out = pipe->PopDue();
  REQUIRE(out.size() == 2);
  REQUIRE(out[0].data == "during");
  REQUIRE(out[1].end_of_stream);
}

TEST_CASE("a partition of either end cuts the pipe") {
  Fixture f;
  f.Set({});
  auto pipe = f.Pipe();
  REQUIRE(f.links.SetPartitioned("b", true).ok());
  pipe->Push("x");
  REQUIRE(pipe->NextRelease() == absl::InfiniteFuture());
  f.clock.Advance(absl::Seconds(1));
  REQUIRE(pipe->PopDue().empty());
  REQUIRE(f.links.SetPartitioned("b", false).ok());
  REQUIRE(Joined(pipe->PopDue()) == "x");
}

}  // namespace
}  // namespace codeco::codef
