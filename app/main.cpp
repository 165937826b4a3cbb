// sluice entry point: picks the mode (app/modes.cpp).
#include <string_view>
#include <vector>

#include "app/modes.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  const std::string_view mode = args.empty() ? std::string_view() : args.front();
  if (!args.empty()) args.erase(args.begin());
  return sluice::app::run_mode(mode, args);
}
