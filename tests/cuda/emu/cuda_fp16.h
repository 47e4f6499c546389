// tests/cuda/emu: stands in for the CUDA header of this name (emu.h says how)
#pragma once
#include "emu.h"
