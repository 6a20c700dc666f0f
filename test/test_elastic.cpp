// pitrain elastic's pieces that need no cluster: hostfiles, the remote shell, the probes.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>

#include "helpers.h"
#include "pitrain/elastic.h"
#include "pitrain/error.h"

using namespace pitrain;
using pitrain::test::TempDir;

TEST_CASE("a hostfile's hosts, slots and comments; a bad slots count names the line") {
  TempDir dir;
  std::ofstream(dir / "hosts") << "# four Pis\nraspi1 slots=2\n\n  raspi2   # the second\nraspi3 slots=1 max_slots=4\n";
  const auto hosts = read_hostfile(dir / "hosts");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].name == "raspi1");
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[1].slots == 1);
  CHECK(hosts[2].line == "raspi3 slots=1 max_slots=4");
  write_hostfile(dir / "again", {hosts[0], hosts[2]});
  CHECK(read_hostfile(dir / "again").size() == 2);
  std::ofstream(dir / "bad") << "raspi1\nraspi2 slots=x\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "bad"), Catch::Contains("bad:2: 'slots=x' is not slots=N"));
  std::ofstream(dir / "empty") << "# nothing\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "empty"), Catch::Contains("no hosts"));
}

TEST_CASE("the remote shell is mpirun's: --mca plm_rsh_agent, else the environment, else ssh in batch mode") {
  unsetenv("OMPI_MCA_plm_rsh_agent");
  const auto ssh = remote_shell({}, 3);
  CHECK(ssh == std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3"});
  setenv("OMPI_MCA_plm_rsh_agent", "rsh : ssh", 1);
  CHECK(remote_shell({"--bind-to", "none"}, 3) == std::vector<std::string>{"rsh"});
  CHECK(remote_shell({"--mca", "plm_rsh_agent", "/x/netns_rsh.sh"}, 3) == std::vector<std::string>{"/x/netns_rsh.sh"});
  unsetenv("OMPI_MCA_plm_rsh_agent");
}

TEST_CASE("hosts are probed at once, and one that does not answer in time counts as lost") {
  // The "shell" runs `sh -c SCRIPT HOST true`: HOST is $0.
  const std::vector<std::string> shell = {"sh", "-c", "case $0 in up*) exit 0 ;; slow) sleep 20 ;; *) exit 255 ;; esac"};
  const std::vector<Host> hosts = {{"up1", "up1", 1}, {"slow", "slow", 1}, {"down", "down", 1}, {"up2", "up2", 1}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto answered = probe_hosts(shell, hosts, 1.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(answered == std::vector<bool>{true, false, false, true});
  CHECK(seconds < 5);  // the slow host's 20 s were cut at the timeout
}
