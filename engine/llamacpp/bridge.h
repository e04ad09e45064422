// C side of the log bridge: llama.cpp and ggml log through llmserve_log, which
// drops messages below the configured level before crossing into Go.
#pragma once
#include "ggml.h"

void llmserve_log_install(int min_level);
