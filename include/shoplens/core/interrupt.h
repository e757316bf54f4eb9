// SIGINT/SIGTERM handling: the first signal asks long work to stop at its next safe point
// (it then throws InterruptedError, exit code 130); a second one ends the process at once.
#pragma once

namespace shoplens {

void install_interrupt_handlers();
bool interrupt_requested();
void throw_if_interrupted();
// For tests and for components that want to stop work programmatically.
void request_interrupt();
void clear_interrupt();

}  // namespace shoplens
