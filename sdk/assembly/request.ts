// Per-request contexts (proxy-wasm's HTTP context): state that lives from the request callback
// to the response callback of one request, then is dropped. The host numbers the open requests
// (proxy_request_contexts, a context argument to each callback, proxy_on_request_done); exports.ts
// keeps one RequestContext per number and recycles the objects.

/**
 * Subclass it with the fields one request needs, and return a new one from
 * `Step.newRequestContext()`. `ctx.request` is the request's object in both callbacks (null in
 * onResponse when the request phase did not run the step for it, e.g. an earlier step answered
 * locally). Objects are reused for later requests: `onDone()` runs when the request ends — after
 * onResponse, or without it when the request ended otherwise (a later step rejected it, no reply
 * was due, the upstream call failed, its connection closed) — and should clear what must not
 * carry over (buffers may be kept). A trap drops every context with the instance.
 */
export class RequestContext {
  onDone(): void {}
}
