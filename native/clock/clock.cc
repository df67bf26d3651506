// The step clock: a time-stamp counter read that V8 calls as a fast API call from optimised
// JavaScript (no handle scope, no JS-to-C++ trampoline), for the profiler's per-step timing. A
// request with the eight built-ins reads the clock a dozen times; performance.now() costs ~35 ns a
// read here and this ~10 ns.
//
// ticks(): the counter since the addon was loaded, as a double. On x86-64 it is the CPU's
// time-stamp counter (rdtsc); elsewhere CLOCK_MONOTONIC in ns. nsPerTick() measures the
// counter's rate against CLOCK_MONOTONIC over a few milliseconds. monotonic(): CLOCK_MONOTONIC in
// ns since the addon was loaded, also a fast call: the clock performance.now() reads (through the
// vDSO, no system call, with kvm-clock as with tsc), without the binding's cost (~28 against ~46 ns
// a read on a kvm-clock VM). runtime/step-clock.ts decides which to use (the kernel must trust the
// TSC as its own clocksource for ticks(); monotonic() otherwise).
//
// Node 20's headers do not ship v8-fast-api-calls.h. V8 exports what a fast call needs
// (CFunction's constructor), and Node has already built the CFunctionInfo of the signature used here,
// `double (v8::Local<v8::Object> receiver)`, for its own bindings: it is looked up by its symbol and
// reused, so nothing here depends on the layout or numbering of V8's type descriptions (CTypeInfo,
// CFunctionInfo); only CFunction's two members are declared below. Without
// that symbol (another Node version) `fast` is false and step-clock.ts keeps performance.now().
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <mutex>
#include <new>
#include <node.h>
#include <v8.h>

namespace v8 {
class CFunctionInfo;
// The two members of V8's CFunction (v8-fast-api-calls.h); built only by V8's exported constructor.
class CFunction {
 public:
  CFunction(const void* address, const CFunctionInfo* type_info);

 private:
  const void* address_;
  const CFunctionInfo* type_info_;
};
}  // namespace v8

namespace {

// The CFunctionInfo of `double (v8::Local<v8::Object>)` that Node built for its own bindings, and
// its guard (non-zero once it is constructed).
const char kInfoSymbol[] =
    "_ZZN2v88internal28CFunctionBuilderWithFunctionINS_16CTypeInfoBuilderIdJEEEJNS2_INS_5LocalINS_6ObjectEEEJEEEEE5BuildEvE8instance";
const char kGuardSymbol[] =
    "_ZGVZN2v88internal28CFunctionBuilderWithFunctionINS_16CTypeInfoBuilderIdJEEEJNS2_INS_5LocalINS_6ObjectEEEJEEEEE5BuildEvE8instance";

// Set once per process (the addon may be loaded by several threads, each its own context).
uint64_t raw_base = 0;
uint64_t monotonic_base = 0;
std::once_flag init_once;
const v8::CFunction* fast_ticks = nullptr;
const v8::CFunction* fast_monotonic = nullptr;
// Calls that took the slow path (a test checks that optimised code does not).
double slow_calls = 0;

inline uint64_t monotonic_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

inline uint64_t raw() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return monotonic_ns();
#endif
}

inline double ticks() { return (double)(raw() - raw_base); }

double FastTicks(v8::Local<v8::Object> receiver) {
  (void)receiver;
  return ticks();
}

void SlowTicks(const v8::FunctionCallbackInfo<v8::Value>& info) {
  slow_calls++;
  info.GetReturnValue().Set(ticks());
}

inline double monotonic() { return (double)(monotonic_ns() - monotonic_base); }

double FastMonotonic(v8::Local<v8::Object> receiver) {
  (void)receiver;
  return monotonic();
}

void SlowMonotonic(const v8::FunctionCallbackInfo<v8::Value>& info) {
  slow_calls++;
  info.GetReturnValue().Set(monotonic());
}

void SlowCalls(const v8::FunctionCallbackInfo<v8::Value>& info) { info.GetReturnValue().Set(slow_calls); }

#if defined(__x86_64__)
// A counter reading and the CLOCK_MONOTONIC time it was taken at: the reading between two clock
// reads, taken again until they are less than 2 µs apart (not preempted or interrupted between),
// at their midpoint. Gives up after 1000 tries (false).
bool Paired(uint64_t* ns, uint64_t* ticks) {
  for (int i = 0; i < 1000; i++) {
    const uint64_t before = monotonic_ns();
    const uint64_t c = raw();
    const uint64_t after = monotonic_ns();
    if (after - before < 2000) {
      *ns = before + (after - before) / 2;
      *ticks = c;
      return true;
    }
  }
  return false;
}
#endif

// ns per tick, measured over `ms` milliseconds (spinning: the caller does it once, at start);
// 0 when no undisturbed reading could be paired with the clock.
void NsPerTick(const v8::FunctionCallbackInfo<v8::Value>& info) {
#if defined(__x86_64__)
  double ms = info.Length() > 0 && info[0]->IsNumber() ? info[0].As<v8::Number>()->Value() : 5;
  if (!(ms > 0) || ms > 1000) ms = 5;
  uint64_t t0, c0, t1, c1;
  if (!Paired(&t0, &c0)) return info.GetReturnValue().Set(0.0);
  do {
    if (!Paired(&t1, &c1)) return info.GetReturnValue().Set(0.0);
  } while ((double)(t1 - t0) < ms * 1e6);
  info.GetReturnValue().Set(c1 > c0 ? (double)(t1 - t0) / (double)(c1 - c0) : 0.0);
#else
  info.GetReturnValue().Set(1.0);
#endif
}

alignas(alignof(void*)) unsigned char cfunction_storage[sizeof(v8::CFunction)];
alignas(alignof(void*)) unsigned char monotonic_storage[sizeof(v8::CFunction)];

void Set(v8::Local<v8::Context> context, v8::Local<v8::Object> target, const char* name, v8::Local<v8::Value> value) {
  v8::Isolate* isolate = context->GetIsolate();
  target->Set(context, v8::String::NewFromUtf8(isolate, name).ToLocalChecked(), value).Check();
}

}  // namespace

void InitOnce() {
  raw_base = raw();
  monotonic_base = monotonic_ns();
  void* info = dlsym(RTLD_DEFAULT, kInfoSymbol);
  const volatile unsigned char* guard = static_cast<const volatile unsigned char*>(dlsym(RTLD_DEFAULT, kGuardSymbol));
  if (info != nullptr && guard != nullptr && *guard != 0) {
    fast_ticks = new (cfunction_storage) v8::CFunction(reinterpret_cast<const void*>(FastTicks), static_cast<const v8::CFunctionInfo*>(info));
    fast_monotonic =
        new (monotonic_storage) v8::CFunction(reinterpret_cast<const void*>(FastMonotonic), static_cast<const v8::CFunctionInfo*>(info));
  }
}

NODE_MODULE_INIT() {
  (void)module;
  v8::Isolate* isolate = context->GetIsolate();
  std::call_once(init_once, InitOnce);
  const v8::CFunction* fast = fast_ticks;
  v8::Local<v8::FunctionTemplate> ticks_template = v8::FunctionTemplate::New(
      isolate, SlowTicks, v8::Local<v8::Value>(), v8::Local<v8::Signature>(), 0, v8::ConstructorBehavior::kThrow,
      v8::SideEffectType::kHasNoSideEffect, fast);
  Set(context, exports, "ticks", ticks_template->GetFunction(context).ToLocalChecked());
  v8::Local<v8::FunctionTemplate> monotonic_template = v8::FunctionTemplate::New(
      isolate, SlowMonotonic, v8::Local<v8::Value>(), v8::Local<v8::Signature>(), 0, v8::ConstructorBehavior::kThrow,
      v8::SideEffectType::kHasNoSideEffect, fast_monotonic);
  Set(context, exports, "monotonic", monotonic_template->GetFunction(context).ToLocalChecked());
  Set(context, exports, "nsPerTick", v8::FunctionTemplate::New(isolate, NsPerTick)->GetFunction(context).ToLocalChecked());
  Set(context, exports, "slowCalls", v8::FunctionTemplate::New(isolate, SlowCalls)->GetFunction(context).ToLocalChecked());
  Set(context, exports, "fast", v8::Boolean::New(isolate, fast != nullptr));
#if defined(__x86_64__)
  Set(context, exports, "source", v8::String::NewFromUtf8Literal(isolate, "rdtsc"));
#else
  Set(context, exports, "source", v8::String::NewFromUtf8Literal(isolate, "monotonic"));
#endif
}
