/*
 * vmmd's one process-wide state (env.h).
 */
#include "env.h"

struct vmmd *env;
