// The epilogue's arithmetic (gemmtune/types.hpp, Epilogue), one definition for every family's
// store and for the reference: D = act(alpha * acc + beta * C + bias), or gated, D's element i
// act(gate_i) * up_i of op(A)'s gate and up rows. A generated unit's Config says which: BIAS
// (Bias's values: 0 none, 1 along M, 2 along N), ACTIVATION (Activation's: 0 identity, 1 ReLU,
// 2 GELU, 3 GELU's tanh form, 4 SiLU), GATE (Gate's: 0 none, 1 halves, 2 interleaved) and AUX
// (1: the pre-activation is stored too, in GemmCore::aux, laid out as D).
#pragma once
#include "common.cuh"

namespace gemmtune {

enum : int { BIAS_NONE = 0, BIAS_M = 1, BIAS_N = 2 };
enum : int { ACT_IDENTITY = 0, ACT_RELU = 1, ACT_GELU = 2, ACT_GELU_TANH = 3, ACT_SILU = 4 };
enum : int { GATE_NONE = 0, GATE_HALVES = 1, GATE_INTERLEAVED = 2 };

// The rows of op(A) (of m) whose products gate and scale D's row i of a gated problem: the first
// and second halves (Hugging Face's [gate; up]), or rows 2i and 2i + 1.
GEMMTUNE_DEVICE_INLINE int gate_row_of(int gate, int i) {
  return gate == GATE_INTERLEAVED ? 2 * i : i;
}
GEMMTUNE_DEVICE_INLINE int up_row_of(int gate, int i, int m) {
  return gate == GATE_INTERLEAVED ? 2 * i + 1 : m / 2 + i;
}

// The math library's functions of float and of double, by overload.
GEMMTUNE_DEVICE_INLINE float erf_of(float x) {
  return erff(x);
}
GEMMTUNE_DEVICE_INLINE double erf_of(double x) {
  return erf(x);
}
GEMMTUNE_DEVICE_INLINE float tanh_of(float x) {
  return tanhf(x);
}
GEMMTUNE_DEVICE_INLINE double tanh_of(double x) {
  return tanh(x);
}
GEMMTUNE_DEVICE_INLINE float exp_of(float x) {
  return expf(x);
}
GEMMTUNE_DEVICE_INLINE double exp_of(double x) {
  return exp(x);
}

// The activation in F (float in kernels, double in the reference): the formulas of
// torch.nn.functional's relu, gelu (approximate "none" and "tanh") and silu.
template <class F>
GEMMTUNE_DEVICE_INLINE F activate(int act, F v) {
  switch (act) {
    case ACT_RELU:
      return v > F(0) ? v : F(0);
    case ACT_GELU:
      return F(0.5) * v * (F(1) + erf_of(v * F(0.70710678118654752440)));
    case ACT_GELU_TANH:
      return F(0.5) * v *
             (F(1) + tanh_of(F(0.79788456080286535588) * (v + F(0.044715) * v * v * v)));
    case ACT_SILU:
      return v / (F(1) + exp_of(-v));
    default:
      return v;
  }
}

// D's type code of a Config (data_types.h): its DTYPE, f32 where it has none (simt's).
template <class Cfg, class = void>
struct OutputType {
  static constexpr int value = GEMMTUNE_TYPE_F32;
};
template <class Cfg>
struct OutputType<Cfg, decltype(void(Cfg::DTYPE))> {
  static constexpr int value = Cfg::DTYPE;
};

// A kernel's epilogue, from its Config.
template <class Cfg>
struct EpilogueOp {
  static constexpr int BIAS = Cfg::BIAS, ACTIVATION = Cfg::ACTIVATION, GATE = Cfg::GATE;
  static constexpr bool AUX = Cfg::AUX != 0;
  // Where D is 16-bit, activations take shorter forms whose errors lie under its rounding: GELU's
  // tanh form and SiLU one tanh.approx (one MUFU operation, relative error about 2^-11) rather than
  // an exp and a division (two, a few ulp); GELU an erfc of a fitted polynomial (gelu_erfc) rather
  // than erff's 25 instructions. The MUFU pipe and the issue of these instructions bound such
  // epilogues (docs/PERF.md, 'An activation costs a MUFU an element').
  static constexpr bool SHORT_FORMS = OutputType<Cfg>::value != GEMMTUNE_TYPE_F32;

  // v plus the bias of output element (m, n) (of D's type OUT: data_types.h's codes). The store
  // skips elements outside D, so the bias read is bounded here too.
  template <int OUT>
  GEMMTUNE_DEVICE_INLINE static float add_bias(float v, const GemmCore& core, int m, int n) {
    if constexpr (BIAS == BIAS_NONE) {
      return v;
    } else {
      const int i = BIAS == BIAS_M ? m : n;
      if (i >= (BIAS == BIAS_M ? core.m : core.n)) return v;
      return v + load_bias<OUT>(core.bias, i);
    }
  }

  // The bias of D's elements (m, n) and (m + 1, n): BIAS_M's two neighbours, BIAS_N's one value
  // twice; zeros without a bias, and past D. Stores that write through shared memory load it
  // ahead of a run of values: a load among their stores (asm with a memory clobber) would wait a
  // memory latency each.
  template <int OUT>
  GEMMTUNE_DEVICE_INLINE static float2 bias_pair(const GemmCore& core, int m, int n) {
    if constexpr (BIAS == BIAS_M) {
      return make_float2(bias_of<OUT>(core.bias, m, core.m),
                         bias_of<OUT>(core.bias, m + 1, core.m));
    } else if constexpr (BIAS == BIAS_N) {
      const float b = bias_of<OUT>(core.bias, n, core.n);
      return make_float2(b, b);
    } else {
      return make_float2(0.0f, 0.0f);
    }
  }

  // The activation, after C and the bias are in.
  GEMMTUNE_DEVICE_INLINE static float finish(float v) {
    if constexpr (ACTIVATION == ACT_IDENTITY)
      return v;
    else if constexpr (ACTIVATION == ACT_SILU)
      return SHORT_FORMS ? half_one_plus_tanh(v, 0.5f * v) : sigmoid_times(v, v);
    else if constexpr (ACTIVATION == ACT_GELU_TANH)
      // 0.5 (1 + tanh(z)) is sigmoid(2z): the tanh form in an exp and a division, a third of
      // tanhf's instructions at a few ulp.
      return SHORT_FORMS ? half_one_plus_tanh(v, 0.7978845608028654f * (v + 0.044715f * v * v * v))
                         : sigmoid_times(v, 1.5957691216057308f * (v + 0.044715f * v * v * v));
    else if constexpr (ACTIVATION == ACT_GELU && SHORT_FORMS)
      return gelu_erfc(v);  // (min.NaN, sm_80 on: where D is 16-bit)
    else
      return activate<float>(ACTIVATION, v);
  }
  GEMMTUNE_DEVICE_INLINE static void finish(float& v0, float& v1) {
    v0 = finish(v0);
    v1 = finish(v1);
  }
  // The same for pair j of a store's accessor (store_pairs.cuh), which first keeps the
  // pre-activation where the problem asks for it.
  template <class At>
  GEMMTUNE_DEVICE_INLINE static void finish(const At& at, int j, float& v0, float& v1) {
    if constexpr (AUX) at.keep(j, v0, v1);
    finish(v0, v1);
  }

  // Where the pre-activation of the element of D at `d` goes: the same place of the aux output,
  // which is laid out as D; null without one.
  template <class E>
  GEMMTUNE_DEVICE_INLINE static E* aux_at(const GemmCore& core, const E* d) {
    if constexpr (AUX)
      return reinterpret_cast<E*>(core.aux) + (d - reinterpret_cast<const E*>(core.d));
    else
      return nullptr;
  }

  // D's element (i, n) of a gated problem from alpha times its gate and up sums: act(gate + its
  // bias) * (up + its bias), the bias along M that of their rows of op(A).
  template <int OUT>
  GEMMTUNE_DEVICE_INLINE static float gated(const GemmCore& core, float gate, float up, int i,
                                            int n) {
    const float g = add_bias<OUT>(gate, core, gate_row_of(GATE, i), n);
    return finish(g) * add_bias<OUT>(up, core, up_row_of(GATE, i, core.m), n);
  }

 private:
  // v * sigmoid(z), in approximate exp and division: errors of a few ulp, far below a 16-bit
  // output's rounding; a large -z makes the divisor infinite and the result -0, the limit.
  GEMMTUNE_DEVICE_INLINE static float sigmoid_times(float v, float z) {
    return __fdividef(v, 1.0f + __expf(-z));
  }
  // GELU, v Phi(v) = relu(v) - |v| erfc(z) / 2 with z = |v| / sqrt 2 (no cancellation in the
  // negative tail), and erfc(z) = t exp(h(t) - z^2), t = 1 / (1 + z / 2), h a polynomial of degree
  // 5 fitted on z in [0, 9.5]: relative error under 2e-5 (an f16 output rounds at 2.4e-4) in an
  // RCP, an EX2 and 13 other instructions. In base 2, scaled: a = z sqrt(log2 e), and erfc's factor
  // |v| / 2 = a / (2 K1) goes into h's constant. a stops at 9.5 sqrt(log2 e), where the EX2
  // flushes to zero anyway, so that v = +inf gives inf (not inf * 0); min.NaN keeps a NaN.
  GEMMTUNE_DEVICE_INLINE static float gelu_erfc(float v) {
    constexpr float K1 = 0.849321783f;  // sqrt(log2 e / 2)
    constexpr float K2 = 0.416277319f;  // 1 / (2 sqrt(log2 e))
    constexpr float A_END = 11.4106627f;
    float a;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(a) : "f"(fabsf(v) * K1), "f"(A_END));
    float t, e2;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(a, K2, 1.0f)));
    float h = 0.330079198f;
    h = fmaf(h, t, -1.02315879f);
    h = fmaf(h, t, 0.684561193f);
    h = fmaf(h, t, 0.367079526f);
    h = fmaf(h, t, 1.46868324f);
    h = fmaf(h, t, -2.59161663f);
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e2) : "f"(fmaf(-a, a, h)));
    return fmaxf(v, 0.0f) - a * t * e2;
  }
  // v * 0.5 (1 + tanh(z)) = v * sigmoid(2z), in one tanh.approx.f32 (PTX ISA; sm_75 on).
  GEMMTUNE_DEVICE_INLINE static float half_one_plus_tanh(float v, float z) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(z));
    const float h = 0.5f * v;
    return fmaf(h, t, h);
  }

  template <int OUT>
  GEMMTUNE_DEVICE_INLINE static float bias_of(unsigned long long bias, int i, int extent) {
    return i < extent ? load_bias<OUT>(bias, i) : 0.0f;
  }
  template <int OUT>
  GEMMTUNE_DEVICE_INLINE static float load_bias(unsigned long long bias, int i) {
    if constexpr (OUT == GEMMTUNE_TYPE_F32)
      return __ldg(reinterpret_cast<const float*>(bias) + i);
    else if constexpr (OUT == GEMMTUNE_TYPE_F16)
      return f16_to_f32(__ldg(reinterpret_cast<const u16*>(bias) + i));
    else
      return bf16_to_f32(__ldg(reinterpret_cast<const u16*>(bias) + i));
  }
};

}  // namespace gemmtune
