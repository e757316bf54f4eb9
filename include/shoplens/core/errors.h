// Typed errors. They are thrown inside the library, caught once in `main`, and mapped to the
// documented exit codes (README.md): 0 ok, 1 failure, 2 usage or config error, 130 interrupted.
#pragma once

#include <stdexcept>
#include <string>

namespace shoplens {

enum class ExitCode : int { kOk = 0, kFailure = 1, kUsage = 2, kInterrupted = 130 };

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  virtual ExitCode exit_code() const { return ExitCode::kFailure; }
};

// A mistake on the command line (unknown flag value, missing argument).
class UsageError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kUsage; }
};

// A config file or override that does not validate; the message names the JSON path.
class ConfigError : public Error {
 public:
  using Error::Error;
  ExitCode exit_code() const override { return ExitCode::kUsage; }
};

// Input data that cannot be used (malformed manifest, empty dataset, corrupt shard index).
class DataError : public Error {
 public:
  using Error::Error;
};

// The file system refused (cannot open, write, rename, disk full).
class IoError : public Error {
 public:
  using Error::Error;
};

// The device (or the memory budget standing in for it) refused an allocation during a training
// step's forward/backward; the step left no gradients behind and can be retried smaller.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// SIGINT/SIGTERM arrived; work stopped at a safe point.
class InterruptedError : public Error {
 public:
  InterruptedError() : Error("interrupted") {}
  ExitCode exit_code() const override { return ExitCode::kInterrupted; }
};

}  // namespace shoplens
