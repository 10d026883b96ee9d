/* The library's version (the CMake project version). */
#include "qmm.h"

#ifndef QMM_VERSION_STRING
#define QMM_VERSION_STRING "unknown"
#endif

const char *qmm_version(void) { return QMM_VERSION_STRING; }
