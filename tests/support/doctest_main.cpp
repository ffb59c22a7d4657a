// doctest's main, plus a watchdog: a test case that runs longer than
// PAGEFILE_TEST_WATCHDOG_S seconds (default 90, under meson's timeout of
// 120) is stopped with the name of the case and every thread's stack
// (through gdb, when installed), so a hang seen once in CI can be read
// afterwards instead of showing only as a TIMEOUT.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* watchdog = new Watchdog();  // never destroyed: its thread outlives main's statics
    return *watchdog;
  }

  void started(const std::string& name) {
    std::lock_guard lock(mu_);
    name_ = name;
    deadline_ = Clock::now() + limit_;
    running_ = true;
    changed_.notify_all();
  }

  void ended() {
    std::lock_guard lock(mu_);
    running_ = false;
    changed_.notify_all();
  }

 private:
  Watchdog() {
    const char* env = std::getenv("PAGEFILE_TEST_WATCHDOG_S");
    long seconds = env != nullptr ? std::strtol(env, nullptr, 10) : 90;
    limit_ = std::chrono::seconds(seconds > 0 ? seconds : 90);
    std::thread([this] { watch(); }).detach();
  }

  void watch() {
    std::unique_lock lock(mu_);
    for (;;) {
      if (!running_) {
        changed_.wait(lock);
        continue;
      }
      Clock::time_point deadline = deadline_;
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && running_ && deadline_ == deadline) {
        std::fprintf(stderr, "\nwatchdog: test case \"%s\" still running after %lld s; threads:\n", name_.c_str(),
                     static_cast<long long>(limit_.count()));
        std::fflush(stderr);
        std::string command = "gdb -batch -nx -p " + std::to_string(getpid()) +
                              " -ex 'thread apply all bt' 1>&2 2>/dev/null </dev/null";
        if (std::system("command -v gdb >/dev/null 2>&1") == 0) {
          (void)std::system(command.c_str());
        } else {
          std::fprintf(stderr, "(gdb is not installed: no stacks)\n");
        }
        std::abort();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::chrono::seconds limit_{90};
  std::string name_;
  Clock::time_point deadline_;
  bool running_ = false;
};

// Tells the watchdog when each test case starts and ends; reports nothing.
struct WatchdogListener : doctest::IReporter {
  explicit WatchdogListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override { Watchdog::instance().started(data.m_name); }
  void test_case_reenter(const doctest::TestCaseData& data) override { Watchdog::instance().started(data.m_name); }
  void test_case_end(const doctest::CurrentTestCaseStats&) override { Watchdog::instance().ended(); }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("pagefile-watchdog", 1, WatchdogListener);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  return context.run();
}
