/*
 * better-sqlite3's addon for several Node versions at once, put in place of
 * node_modules/better-sqlite3/build/Release/better_sqlite3.node by run.sh for the length of
 * a run on another Node version (and put back afterwards).
 *
 * better-sqlite3's addon is not N-API: it is built for one Node ABI (NODE_MODULE_VERSION)
 * and any other Node refuses it. Some suites start the server with nothing of the parent's
 * environment but PATH, so no preload or variable can point those processes elsewhere; a
 * file at the path better-sqlite3 always loads can. When Node dlopens this file, its
 * constructor looks at which executable runs (/proc/self/exe), finds in the table that
 * run.sh compiled in (dispatch-table.h) the addon built for that Node, and dlopens it. That
 * addon's own constructor registers it with Node (node_module_register) while Node's
 * dlopen of this file is still under way, so Node takes it as this file's module, exactly
 * as if this file had registered it. Any executable not in the table, the machine's Node 20
 * among them, gets the addon that npm install built: a Node 20 process started while a run
 * is going on loads what it always loads.
 *
 * A second load in the same process (a worker thread: vitest's threads pool) finds this file
 * already loaded, so no constructor runs and nothing registers. Node then looks for the
 * addon's well-known entry point, node_register_module_v<ABI>, in this file: the ones below
 * forward to the addon's own (better-sqlite3 is context-aware, so it may be initialized once
 * per thread).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MEDIAGATE_DISPATCH_FALLBACK: the addon npm install built (a copy kept in run.sh's cache);
   mediagate_dispatch_table: { realpath of a node executable, the addon built for it }. */
#include "dispatch-table.h"

/* Found by run.sh (grep) to tell this file from better-sqlite3's own addon. */
__attribute__((used)) const char mediagate_dispatch_marker[] = "mediagate-node-versions-dispatch";

/* The addon this process loaded. */
static void* mediagate_dispatch_addon = NULL;

__attribute__((constructor)) static void mediagate_dispatch(void) {
  char exe[PATH_MAX];
  const char* addon = MEDIAGATE_DISPATCH_FALLBACK;
  if (realpath("/proc/self/exe", exe) != NULL) {
    for (size_t i = 0; i < sizeof mediagate_dispatch_table / sizeof mediagate_dispatch_table[0]; i++) {
      if (strcmp(exe, mediagate_dispatch_table[i][0]) == 0) addon = mediagate_dispatch_table[i][1];
    }
  }
  /* As Node itself opens addons (process.dlopen's default flags). Never closed: the addon
     stays loaded for the life of the process, as it would have. */
  mediagate_dispatch_addon = dlopen(addon, RTLD_LAZY);
  if (mediagate_dispatch_addon == NULL) {
    /* Node then fails the require with "Module did not self-register"; this says why. */
    fprintf(stderr, "better_sqlite3.node (scripts/node-versions/dispatch.c): cannot load %s: %s\n", addon, dlerror());
  }
}

/* node_register_module_v<ABI>(exports, module, context): three v8::Local handles, each one
   pointer, passed on as they came. One per ABI the table can hold (Node 20, 22 and 24). */
typedef void (*mediagate_register)(void*, void*, void*);

#define MEDIAGATE_FORWARD(abi)                                                             \
  __attribute__((visibility("default"))) void node_register_module_v##abi(void* exports,  \
                                                                          void* module,   \
                                                                          void* context) { \
    mediagate_register entry = NULL;                                                       \
    if (mediagate_dispatch_addon != NULL)                                                  \
      *(void**)&entry = dlsym(mediagate_dispatch_addon, "node_register_module_v" #abi);   \
    if (entry == NULL) {                                                                   \
      fprintf(stderr, "better_sqlite3.node (scripts/node-versions/dispatch.c): the addon "   \
                      "has no node_register_module_v" #abi "\n");                          \
      return;                                                                              \
    }                                                                                      \
    entry(exports, module, context);                                                       \
  }

MEDIAGATE_FORWARD(115)
MEDIAGATE_FORWARD(127)
MEDIAGATE_FORWARD(137)
