// pitrain elastic's pieces that need no cluster: hostfiles, the remote shell, the probes.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "pitrain/elastic.h"
#include "pitrain/error.h"
#include "pitrain/host_health.h"

using namespace pitrain;
using pitrain::test::TempDir;

TEST_CASE("a hostfile's hosts, slots and comments; a bad slots count names the line") {
  TempDir dir;
  std::ofstream(dir / "hosts")
      << "# four Pis\nraspi1 slots=2\n\n  raspi2   # the second\nraspi3 slots=1 max_slots=4\n"
         "raspi4 slots = 3\nraspi5 count=2\nraspi6 cpu= 4 max_slots=8\n";
  const auto hosts = read_hostfile(dir / "hosts");
  REQUIRE(hosts.size() == 6);
  CHECK(hosts[0].name == "raspi1");
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[1].slots == 1);  // no slots: one rank a host
  CHECK(hosts[2].options == " max_slots=4");
  // Open MPI's other spellings of slots=N
  CHECK(hosts[3].slots == 3);
  CHECK(hosts[4].slots == 2);
  CHECK(hosts[5].slots == 4);
  CHECK(hosts[5].options == " max_slots=8");
  // The launches' hostfiles say every host's slots, so that mpirun places the ranks as counted.
  write_hostfile(dir / "again", {hosts[1], hosts[5]});
  std::ifstream again(dir / "again");
  std::string line1, line2;
  std::getline(again, line1), std::getline(again, line2);
  CHECK(line1 == "raspi2 slots=1");
  CHECK(line2 == "raspi6 slots=4 max_slots=8");
  std::ofstream(dir / "bad") << "raspi1\nraspi2 slots=x\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "bad"), Catch::Contains("bad:2: 'slots=x' is not slots=N"));
  std::ofstream(dir / "bare") << "raspi1 slots\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "bare"), Catch::Contains("bare:1: 'slots' is not slots=N"));
  std::ofstream(dir / "empty") << "# nothing\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "empty"), Catch::Contains("no hosts"));
}

TEST_CASE(
    "a hostfile holds host names and addresses only: one that ssh would read as an option names "
    "its line") {
  TempDir dir;
  std::ofstream(dir / "fine")
      << "pi@raspi1.local slots=2\nraspi_2\n192.168.1.3\nfe80::1%wlan0\n[::1]\n";
  CHECK(read_hostfile(dir / "fine").size() == 5);
  std::ofstream(dir / "evil") << "raspi1 slots=1\n-oProxyCommand=touch${IFS}/tmp/x slots=1\n";
  CHECK_THROWS_WITH(read_hostfile(dir / "evil"),
                    dir / "evil" +
                        ":2: '-oProxyCommand=touch${IFS}/tmp/x' is not a host name or address "
                        "(letters, digits, . - _ : [ ] % @; not starting with -)");
  for (const char* name : {"-raspi", "ras$pi", "raspi;true", "ras`pi`", "raspi/1", "ras\"pi"}) {
    CHECK_FALSE(is_host_name(name));
    std::ofstream(dir / "bad") << "# hosts\n" << name << "\n";
    CHECK_THROWS_WITH(read_hostfile(dir / "bad"),
                      Catch::Contains("bad:2: '" + std::string(name) + "' is not a host name"));
  }
}

TEST_CASE(
    "ranks map to hosts as mpirun places them: each host's slots in turn, or one a host with "
    "--map-by node") {
  const std::vector<Host> hosts = {{"a", 2, ""}, {"b", 1, ""}, {"c", 3, ""}};
  using V = std::vector<std::string>;
  const V by_slot = {"a", "a", "b", "c", "c", "c"};
  unsetenv("OMPI_MCA_rmaps_base_mapping_policy");
  CHECK(rank_hosts(hosts, {}) == by_slot);  // Open MPI's default
  CHECK(rank_hosts(hosts, {"--bind-to", "none", "--map-by", "core"}) == by_slot);
  CHECK(rank_hosts(hosts, {"--map-by", "node"}) == V{"a", "b", "c", "a", "c", "c"});
  CHECK(rank_hosts(hosts, {"--map-by", "NODE:PE=2"}) == V{"a", "b", "c", "a", "c", "c"});
  setenv("OMPI_MCA_rmaps_base_mapping_policy", "node", 1);
  CHECK(rank_hosts(hosts, {}) == V{"a", "b", "c", "a", "c", "c"});
  unsetenv("OMPI_MCA_rmaps_base_mapping_policy");
  // Placements elastic does not count: no host is named.
  CHECK(rank_hosts(hosts, {"--map-by", "ppr:1:node"}).empty());
  CHECK(rank_hosts(hosts, {"--map-by", "node", "--rank-by", "slot"}).empty());
  CHECK(rank_hosts(hosts, {"--rankfile", "ranks"}).empty());
}

TEST_CASE(
    "the remote shell is mpirun's: --mca plm_rsh_agent, else the environment, else ssh in batch "
    "mode") {
  unsetenv("OMPI_MCA_plm_rsh_agent");
  const auto ssh = remote_shell({}, 3);
  CHECK(ssh == std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3"});
  setenv("OMPI_MCA_plm_rsh_agent", "rsh : ssh", 1);
  CHECK(remote_shell({"--bind-to", "none"}, 3) == std::vector<std::string>{"rsh"});
  CHECK(remote_shell({"--mca", "plm_rsh_agent", "/x/netns_rsh.sh"}, 3) ==
        std::vector<std::string>{"/x/netns_rsh.sh"});
  unsetenv("OMPI_MCA_plm_rsh_agent");
  setenv("OMPI_MCA_plm_rsh_args", "-p 2222", 1);  // as mpirun passes them to its daemons
  CHECK(remote_shell({}, 3) == std::vector<std::string>{"ssh", "-p", "2222", "-o", "BatchMode=yes",
                                                        "-o", "ConnectTimeout=3"});
  unsetenv("OMPI_MCA_plm_rsh_args");
}

TEST_CASE("hosts are probed at once, and one that does not answer in time counts as lost") {
  // The "shell" runs `sh -c SCRIPT sh -- HOST true`: `--` is $1, HOST $2.
  const std::vector<std::string> shell = {
      "sh", "-c",
      "[ \"$1\" = -- ] || exit 3; case $2 in up*) exit 0 ;; slow) sleep 20 ;; *) exit 255 ;; esac",
      "sh"};
  // This machine answers without a probe: mpirun starts its ranks without the remote shell.
  const std::vector<Host> hosts = {{"up1", 1, ""}, {"slow", 1, ""},      {"down", 1, ""},
                                   {"up2", 1, ""}, {"localhost", 1, ""}, {"127.0.1.1", 1, ""}};
  const auto t0 = std::chrono::steady_clock::now();
  const auto answered = probe_hosts(shell, hosts, 1.0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(answered == std::vector<bool>{true, false, false, true, true, true});
  CHECK(seconds < 5);  // the slow host's 20 s were cut at the timeout
}

TEST_CASE("a host's power and heat: the Pi firmware's flags, the volt alarm, the thermal zone") {
  TempDir sys;
  const auto write = [&](const std::string& file, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(sys / file).parent_path());
    std::ofstream(sys / file) << text << "\n";
  };
  CHECK(HostHealth(sys.path).problem().empty());  // a machine that exposes none
  write("class/thermal/thermal_zone0/temp", "54000");
  CHECK(HostHealth(sys.path).problem().empty());
  write("class/thermal/thermal_zone0/temp", "82500");
  CHECK(HostHealth(sys.path).problem() == "CPU at 82 C");
  write("class/thermal/thermal_zone0/temp", "54000");
  write("class/hwmon/hwmon0/name", "rpi_volt");
  write("class/hwmon/hwmon0/in0_lcrit_alarm", "1");
  CHECK(HostHealth(sys.path).problem() == "under-voltage now (rpi_volt alarm)");

  // get_throttled, where the Pi kernel has it, wins over the alarm. Under-voltage since boot
  // (bit 16) that was there at the start says nothing; throttling since, during the run, does.
  const std::string flags = "devices/platform/soc/soc:firmware/get_throttled";
  write(flags, "10000");
  HostHealth health(sys.path);
  CHECK(health.problem().empty());
  write(flags, "50000");
  CHECK(health.problem() == "throttled during this run (get_throttled 0x50000)");
  write(flags, "50005");
  CHECK(health.problem() == "under-voltage, throttled now (get_throttled 0x50005)");
  std::ostringstream err;
  health.warn_once(err, 3);
  health.warn_once(err, 3);
  const std::string said = err.str();
  CHECK(said.rfind("pitrain: warning: rank 3 on ", 0) == 0);
  CHECK(said.find("under-voltage, throttled now") != std::string::npos);
  CHECK(std::count(said.begin(), said.end(), '\n') == 1);  // once
}
