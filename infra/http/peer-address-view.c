/*
 * A Node-API addon beside the peer-address preload library (peer-address.c): its exports'
 * `current` is an ArrayBuffer of 8 bytes over the calling thread's note of its current peer
 * (`peer_address_current`: a u32 kind, 4 for IPv4, then the IPv4 address as a u32), which the
 * library rewrites on every read (`recv`, `read`, …). infra/http/PeerAddress.ts loads it once per thread that
 * serves; a request handler then reads the peer's address as two array elements, with no call
 * into uWebSockets.js and nothing allocated.
 *
 * The library is found at load time (dlsym), not linked against: loaded in a process without
 * it, `current` is undefined and the server reads addresses through uWebSockets.js as before.
 * Built by scripts/peer-address.sh into .build/peer-address-view.node with node's own headers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <node_api.h>
#include <stddef.h>

static napi_value init(napi_env env, napi_value exports) {
  void *(*current)(void) = (void *(*)(void))dlsym(RTLD_DEFAULT, "peer_address_current");
  if (current == NULL) return exports;
  napi_value view;
  /* No finalizer: the note lives as long as its thread, and the thread outlives its Node environment. */
  if (napi_create_external_arraybuffer(env, current(), 8, NULL, NULL, &view) != napi_ok) return exports;
  napi_set_named_property(env, exports, "current", view);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
