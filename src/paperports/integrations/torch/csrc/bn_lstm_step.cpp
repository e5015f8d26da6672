// A BN-LSTM's time steps in a few passes over memory each, for CPU (float32 and float64).
//
// Python launches one operation per elementwise step of the cell; at the sizes of
// `paperports bench bnlstm` those launches cost more than the recurrent matrix product.
// These kernels do everything of a step except that product in a few passes, with the same
// saved tensors as the Python path of BNLSTMSequence (bn_lstm_training.py), so that either
// forward pairs with either backward:
//
//   train_forward:  the three batch norms (batch statistics, or the given ones), the gates,
//                   c_t, tanh(BN(c_t)) and h_t, for the running rows of one step;
//   train_backward: the same step's backward, down to the gradients of W_x x_t and W_h h_{t-1}
//                   (the caller multiplies by W_h), accumulating the gammas' and betas'
//                   gradients;
//   eval_rows:      a step with the norms folded into per-step affine maps;
//
// and the three operations registered for Python, train_forward_sequence,
// train_backward_sequence and eval_sequence: the loops over a sequence's steps around them,
// with the recurrent product (oneDNN's linear, as torch.nn.LSTM's CPU path, or torch.mm),
// so that no step goes back to Python.
//
// Each kernel alternates two kinds of pass, each split over the CPU's threads: sums over
// the rows (the batch statistics, the norms' backward sums; threads take blocks of
// columns), and elementwise work along the rows (threads take rows), with every norm
// reduced to per-column coefficients in between. Rows are a step's running sequences (the
// first n of the batch); each loop runs along contiguous memory, so the compiler
// vectorises it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace {

// The kernels read rows through stride(0) and expect contiguous columns.
void check_rows(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "paperports_bnlstm: ", name, " must be on the CPU");
  TORCH_CHECK(t.dim() <= 1 ? t.is_contiguous() : (t.dim() == 2 && t.stride(1) == 1),
              "paperports_bnlstm: ", name, " must be a vector or a matrix with contiguous rows");
}

// exp for float32 without a library call, so that the loops around it vectorise (libm's
// expf does not): Cephes' expf, exp(x) = 2^k exp(r) with r = x - k ln 2 in [-ln2/2, ln2/2]
// and a degree-5 polynomial for exp(r) - 1 - r; relative error about 1e-7 (the tests
// compare with torch). NaN stays NaN; the clamp keeps 2^k a normal float.
inline float exp_(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - k * 0.693359375f + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

inline double exp_(double x) { return std::exp(x); }  // float64: the tests' precision

template <typename T>
inline T sigmoid(T z) {
  return T(1) / (T(1) + exp_(-z));
}

template <typename T>
inline T tanh_(T z) {  // 1 - 2 / (e^{2z} + 1): saturates to +-1 where e^{2z} does
  return T(1) - T(2) / (exp_(T(2) * z) + T(1));
}

// Rows in parallel (elementwise work along each row of `cost` elements).
template <typename F>
void over_rows(int64_t n, int64_t cost, const F& f) {
  at::parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(cost, 1)), f);
}

// Columns in parallel, in blocks of at most kBlock columns (sums over the rows).
constexpr int64_t kBlock = 128;
template <typename F>
void over_columns(int64_t width, const F& f) {
  at::parallel_for(0, (width + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b * kBlock, std::min(width, (b + 1) * kBlock));
  });
}

// Batch mean and biased variance over the n rows (stride ld) of columns [c0, c1) of x, into
// mean[0 .. c1 - c0) and var[0 .. c1 - c0).
template <typename T>
void column_moments(const T* __restrict__ x, int64_t ld, int64_t n, int64_t c0, int64_t c1,
                    T* __restrict__ mean, T* __restrict__ var) {
  const int64_t w = c1 - c0;
  double m[kBlock], v[kBlock];  // in double, as torch's CPU batch norm accumulates
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) m[k] = v[k] = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const T* __restrict__ row = x + r * ld + c0;
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) m[k] += row[k];
  }
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) m[k] /= static_cast<double>(n);
  for (int64_t r = 0; r < n; ++r) {
    const T* __restrict__ row = x + r * ld + c0;
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) {
      const double d = static_cast<double>(row[k]) - m[k];
      v[k] += d * d;
    }
  }
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) {
    mean[k] = static_cast<T>(m[k]);
    var[k] = static_cast<T>(v[k] / static_cast<double>(n));
  }
}

// The batch statistics of columns [c0, c1): into mean and invstd = 1 / sqrt(var + eps)
// unless `given` (then they are read as they are), and the mean and variance into `obs`
// (two rows `os1` apart) if it is not null.
template <typename T>
void norm_statistics(const T* x, int64_t ld, int64_t n, int64_t c0, int64_t c1, double eps,
                     bool given, T* mean, T* invstd, T* obs, int64_t os1) {
  T var[kBlock];
  if (!given) {
    column_moments(x, ld, n, c0, c1, mean + c0, var);
#pragma omp simd
    for (int64_t k = c0; k < c1; ++k) invstd[k] = T(1) / std::sqrt(var[k - c0] + T(eps));
  }
  if (obs != nullptr) column_moments(x, ld, n, c0, c1, obs + c0, obs + os1 + c0);
}

template <typename T>
void train_forward_impl(const at::Tensor& wx, const at::Tensor& a, const at::Tensor& c_prev,
                        const at::Tensor& gamma_x, const c10::optional<at::Tensor>& bias,
                        const at::Tensor& gamma_h, const at::Tensor& gamma_c,
                        const at::Tensor& beta_c, at::Tensor& mean, at::Tensor& invstd,
                        at::Tensor& act, at::Tensor& c_new, at::Tensor& th, at::Tensor& h_new,
                        const c10::optional<at::Tensor>& observed, bool given, double eps_x,
                        double eps_h, double eps_c) {
  const int64_t n = wx.size(0), h4 = wx.size(1), H = h4 / 4;
  const T *px = wx.data_ptr<T>(), *pa = a.data_ptr<T>(), *pc = c_prev.data_ptr<T>();
  const int64_t ldx = wx.stride(0), lda = a.stride(0), ldc = c_prev.stride(0);
  const T *gx = gamma_x.data_ptr<T>(), *gh = gamma_h.data_ptr<T>();
  const T *gc = gamma_c.data_ptr<T>(), *bc = beta_c.data_ptr<T>();
  const T* pb = bias.has_value() ? bias->data_ptr<T>() : nullptr;
  T* m = mean.data_ptr<T>();
  T* inv = invstd.data_ptr<T>();
  const int64_t ms = mean.stride(0), is = invstd.stride(0);
  T *pact = act.data_ptr<T>(), *pcn = c_new.data_ptr<T>(), *pth = th.data_ptr<T>();
  T* ph = h_new.data_ptr<T>();
  const int64_t ldact = act.stride(0), ldcn = c_new.stride(0), ldth = th.stride(0);
  const int64_t ldh = h_new.stride(0);
  T* obs = observed.has_value() ? observed->data_ptr<T>() : nullptr;
  const int64_t os0 = obs != nullptr ? observed->stride(0) : 0;
  const int64_t os1 = obs != nullptr ? observed->stride(1) : 0;
  // the gates' pre-activations as z = (wx - mean_x) kx + (a - mean_h) ka + k0, per column
  // (centred first: folding the means into k0 would cancel digits where |mean| >> std)
  std::vector<T> coef(static_cast<size_t>(3 * h4 + H));
  T *kx = coef.data(), *ka = kx + h4, *k0 = ka + h4, *kc = k0 + h4;
  over_columns(h4, [=](int64_t c0, int64_t c1) {
    norm_statistics(px, ldx, n, c0, c1, eps_x, given, m, inv, obs, os1);
    norm_statistics(pa, lda, n, c0, c1, eps_h, given, m + ms, inv + is,
                    obs == nullptr ? obs : obs + os0, os1);
#pragma omp simd
    for (int64_t k = c0; k < c1; ++k) {
      kx[k] = gx[k] * inv[k];
      ka[k] = gh[k] * inv[is + k];
      k0[k] = pb != nullptr ? pb[k] : T(0);
    }
  });
  over_rows(n, h4, [=](int64_t r0, int64_t r1) {
    const T *__restrict__ mx = m, *__restrict__ mh = m + ms;
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ xr = px + r * ldx, *__restrict__ ar = pa + r * lda;
      const T* __restrict__ cr = pc + r * ldc;
      T *__restrict__ sr = pact + r * ldact, *__restrict__ cn = pcn + r * ldcn;
#pragma omp simd
      for (int64_t k = 0; k < 2 * H; ++k)
        sr[k] = sigmoid((xr[k] - mx[k]) * kx[k] + (ar[k] - mh[k]) * ka[k] + k0[k]);
#pragma omp simd
      for (int64_t k = 2 * H; k < 3 * H; ++k)
        sr[k] = tanh_((xr[k] - mx[k]) * kx[k] + (ar[k] - mh[k]) * ka[k] + k0[k]);
#pragma omp simd
      for (int64_t k = 3 * H; k < h4; ++k)
        sr[k] = sigmoid((xr[k] - mx[k]) * kx[k] + (ar[k] - mh[k]) * ka[k] + k0[k]);
#pragma omp simd
      for (int64_t j = 0; j < H; ++j) cn[j] = sr[H + j] * cr[j] + sr[j] * sr[2 * H + j];
    }
  });
  over_columns(H, [=](int64_t c0, int64_t c1) {
    norm_statistics(pcn, ldcn, n, c0, c1, eps_c, given, m + 2 * ms, inv + 2 * is,
                    obs == nullptr ? obs : obs + 2 * os0, os1);
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) kc[j] = gc[j] * inv[2 * is + j];
  });
  over_rows(n, 2 * H, [=](int64_t r0, int64_t r1) {
    const T* __restrict__ mc = m + 2 * ms;
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ cn = pcn + r * ldcn, *__restrict__ o = pact + r * ldact + 3 * H;
      T *__restrict__ tr = pth + r * ldth, *__restrict__ hr = ph + r * ldh;
#pragma omp simd
      for (int64_t j = 0; j < H; ++j) {
        const T t = tanh_((cn[j] - mc[j]) * kc[j] + bc[j]);
        tr[j] = t;
        hr[j] = o[j] * t;
      }
    }
  });
}

// A norm's backward as dx = dy * k1 + (x - mean) * k2 + k3 per column, from the column sums
// sdy = sum dy and sdyx = sum dy * xhat (xhat = (x - mean) invstd). With batch statistics,
// dx = gamma invstd (dy - (sdy + xhat sdyx) / n); with given (fixed) ones, gamma invstd dy.
template <typename T>
inline void norm_backward_coefficients(T gamma, T invstd, T sdy, T sdyx, int64_t n, bool given,
                                       T& k1, T& k2, T& k3) {
  k1 = gamma * invstd;
  if (given) {
    k2 = k3 = T(0);
  } else {
    k2 = -k1 * sdyx / T(n) * invstd;
    k3 = -k1 * sdy / T(n);
  }
}

// Column sums sdy = sum dy and sdyx = sum dy * (x - mean) * invstd over the n rows.
template <typename T>
void column_sums(const T* __restrict__ dy, int64_t lddy, const T* __restrict__ x, int64_t ldx,
                 int64_t n, int64_t c0, int64_t c1, const T* mean, const T* invstd, T* sdy,
                 T* sdyx) {
  const int64_t w = c1 - c0;
  double s[kBlock], sx[kBlock];
  const T* __restrict__ mu = mean + c0;
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) s[k] = sx[k] = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const T *__restrict__ d = dy + r * lddy + c0, *__restrict__ xr = x + r * ldx + c0;
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) {
      s[k] += d[k];
      sx[k] += static_cast<double>(d[k]) * (xr[k] - mu[k]);  // centred, in double
    }
  }
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) {
    sdy[k] = static_cast<T>(s[k]);
    sdyx[k] = static_cast<T>(sx[k] * invstd[c0 + k]);
  }
}

// column_sums for one dy and two inputs (the h and x norms share the gates' gradient).
template <typename T>
void column_sums2(const T* __restrict__ dy, int64_t lddy, const T* __restrict__ a, int64_t lda,
                  const T* __restrict__ x, int64_t ldx, int64_t n, int64_t c0, int64_t c1,
                  const T* mean_a, const T* invstd_a, const T* mean_x, const T* invstd_x,
                  T* sdy, T* sdya, T* sdyx) {
  const int64_t w = c1 - c0;
  double s[kBlock], sa[kBlock], sx[kBlock];
  const T *__restrict__ ma = mean_a + c0, *__restrict__ mx = mean_x + c0;
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) s[k] = sa[k] = sx[k] = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const T *__restrict__ d = dy + r * lddy + c0, *__restrict__ ar = a + r * lda + c0;
    const T* __restrict__ xr = x + r * ldx + c0;
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) {
      s[k] += d[k];
      sa[k] += static_cast<double>(d[k]) * (ar[k] - ma[k]);
      sx[k] += static_cast<double>(d[k]) * (xr[k] - mx[k]);
    }
  }
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) {
    sdy[k] = static_cast<T>(s[k]);
    sdya[k] = static_cast<T>(sa[k] * invstd_a[c0 + k]);
    sdyx[k] = static_cast<T>(sx[k] * invstd_x[c0 + k]);
  }
}

template <typename T>
void train_backward_impl(const at::Tensor& dh, const at::Tensor& d_out, const at::Tensor& act,
                         const at::Tensor& th, const at::Tensor& c_prev,
                         const at::Tensor& c_new, const at::Tensor& a, const at::Tensor& wx,
                         const at::Tensor& gamma_x, const at::Tensor& gamma_h,
                         const at::Tensor& gamma_c, const at::Tensor& mean,
                         const at::Tensor& invstd, bool given, bool with_bias, at::Tensor& dc,
                         at::Tensor& d_a, at::Tensor& d_wx, at::Tensor& d_gamma,
                         at::Tensor& d_beta) {
  const int64_t n = act.size(0), h4 = act.size(1), H = h4 / 4;
  const T *pdh = dh.data_ptr<T>(), *pdo = d_out.data_ptr<T>(), *pact = act.data_ptr<T>();
  const T *pth = th.data_ptr<T>(), *pcp = c_prev.data_ptr<T>(), *pcn = c_new.data_ptr<T>();
  const T *pa = a.data_ptr<T>(), *px = wx.data_ptr<T>();
  const int64_t lddh = dh.stride(0), lddo = d_out.stride(0), ldact = act.stride(0);
  const int64_t ldth = th.stride(0), ldcp = c_prev.stride(0), ldcn = c_new.stride(0);
  const int64_t lda = a.stride(0), ldx = wx.stride(0);
  const T *gx = gamma_x.data_ptr<T>(), *gh = gamma_h.data_ptr<T>(), *gc = gamma_c.data_ptr<T>();
  const T *m = mean.data_ptr<T>(), *inv = invstd.data_ptr<T>();
  const int64_t ms = mean.stride(0), is = invstd.stride(0);
  T *pdc = dc.data_ptr<T>(), *pda = d_a.data_ptr<T>(), *pdx = d_wx.data_ptr<T>();
  const int64_t lddc = dc.stride(0), ldda = d_a.stride(0), lddx = d_wx.stride(0);
  T *dg = d_gamma.data_ptr<T>(), *db = d_beta.data_ptr<T>();
  const int64_t gs = d_gamma.stride(0), bs = d_beta.stride(0);
  // scratch: the gates' gradients (n, 4H), the cell norm's output gradient (n, H), and the
  // per-column coefficients of the three norms' backwards
  at::Tensor scratch = at::empty({n * (h4 + H) + 3 * H + 6 * h4}, act.options());
  T *ds = scratch.data_ptr<T>(), *dy = ds + n * h4, *kc = dy + n * H;
  T *ka = kc + 3 * H, *kx = ka + 3 * h4;
  over_rows(n, 2 * H, [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ o = pact + r * ldact + 3 * H, *__restrict__ t = pth + r * ldth;
      const T *__restrict__ g1 = pdh + r * lddh, *__restrict__ g2 = pdo + r * lddo;
      T *__restrict__ dso = ds + r * h4 + 3 * H, *__restrict__ dyr = dy + r * H;
#pragma omp simd
      for (int64_t j = 0; j < H; ++j) {
        const T g = g1[j] + g2[j];
        dso[j] = g * t[j] * o[j] * (T(1) - o[j]);
        dyr[j] = g * o[j] * (T(1) - t[j] * t[j]);
      }
    }
  });
  over_columns(H, [=](int64_t c0, int64_t c1) {
    T sdy[kBlock], sdyx[kBlock];
    column_sums(dy, H, pcn, ldcn, n, c0, c1, m + 2 * ms, inv + 2 * is, sdy, sdyx);
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) {
      dg[2 * gs + j] += sdyx[j - c0];
      db[2 * bs + j] += sdy[j - c0];
      norm_backward_coefficients(gc[j], inv[2 * is + j], sdy[j - c0],
                                 sdyx[j - c0], n, given, kc[j], kc[H + j], kc[2 * H + j]);
    }
  });
  over_rows(n, 4 * H, [=](int64_t r0, int64_t r1) {
    const T* __restrict__ mc = m + 2 * ms;
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ s = pact + r * ldact, *__restrict__ cp = pcp + r * ldcp;
      const T *__restrict__ cn = pcn + r * ldcn, *__restrict__ dyr = dy + r * H;
      T *__restrict__ dsr = ds + r * h4, *__restrict__ dcr = pdc + r * lddc;
#pragma omp simd
      for (int64_t j = 0; j < H; ++j) {
        const T i = s[j], f = s[H + j], g = s[2 * H + j];
        const T dct = dyr[j] * kc[j] + (cn[j] - mc[j]) * kc[H + j] + kc[2 * H + j] + dcr[j];
        dsr[j] = dct * g * i * (T(1) - i);
        dsr[H + j] = dct * cp[j] * f * (T(1) - f);
        dsr[2 * H + j] = dct * i * (T(1) - g * g);
        dcr[j] = dct * f;  // the cell's gradient, one step back
      }
    }
  });
  over_columns(h4, [=](int64_t c0, int64_t c1) {
    T sdy[kBlock], sdyx[kBlock], sdyx_x[kBlock];
    column_sums2(ds, h4, pa, lda, px, ldx, n, c0, c1, m + ms, inv + is, m, inv, sdy, sdyx,
                 sdyx_x);
#pragma omp simd
    for (int64_t k = c0; k < c1; ++k) {
      dg[gs + k] += sdyx[k - c0];
      dg[k] += sdyx_x[k - c0];
      if (with_bias) db[k] += sdy[k - c0];
      norm_backward_coefficients(gh[k], inv[is + k], sdy[k - c0], sdyx[k - c0], n,
                                 given, ka[k], ka[h4 + k], ka[2 * h4 + k]);
      norm_backward_coefficients(gx[k], inv[k], sdy[k - c0], sdyx_x[k - c0], n, given,
                                 kx[k], kx[h4 + k], kx[2 * h4 + k]);
    }
  });
  over_rows(n, 2 * h4, [=](int64_t r0, int64_t r1) {
    const T *__restrict__ mx = m, *__restrict__ mh = m + ms;
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ dsr = ds + r * h4, *__restrict__ ar = pa + r * lda;
      const T* __restrict__ xr = px + r * ldx;
      T *__restrict__ dar = pda + r * ldda, *__restrict__ dxr = pdx + r * lddx;
#pragma omp simd
      for (int64_t k = 0; k < h4; ++k) {
        dar[k] = dsr[k] * ka[k] + (ar[k] - mh[k]) * ka[h4 + k] + ka[2 * h4 + k];
        dxr[k] = dsr[k] * kx[k] + (xr[k] - mx[k]) * kx[h4 + k] + kx[2 * h4 + k];
      }
    }
  });
}

// The evaluation step's pass over rows [0, n): per row the gates from the folded affine
// maps, the cell, and h from the cell norm's map. Pointers to each matrix's first row and
// its row stride; the maps are vectors.
template <typename T>
struct EvalRows {
  const T *x, *s_x, *shift, *a, *s_hh, *c, *s_c, *b_c;
  T *h_new, *c_new;
  int64_t ldx, lda, ldc, ldh, ldcn;
};

template <typename T>
void eval_rows(const EvalRows<T>& e, int64_t n, int64_t H) {
  const int64_t h4 = 4 * H;
  over_rows(n, h4, [&](int64_t r0, int64_t r1) {
    std::vector<T> act(static_cast<size_t>(h4));
    T* __restrict__ s = act.data();
    const T *__restrict__ sx = e.s_x, *__restrict__ sh = e.shift, *__restrict__ ps = e.s_hh;
    const T *__restrict__ sc = e.s_c, *__restrict__ bc = e.b_c;
    for (int64_t r = r0; r < r1; ++r) {
      const T *__restrict__ xr = e.x + r * e.ldx, *__restrict__ ar = e.a + r * e.lda;
      const T* __restrict__ cr = e.c + r * e.ldc;
#pragma omp simd
      for (int64_t k = 0; k < 2 * H; ++k) s[k] = sigmoid(xr[k] * sx[k] + sh[k] + ar[k] * ps[k]);
#pragma omp simd
      for (int64_t k = 2 * H; k < 3 * H; ++k) s[k] = tanh_(xr[k] * sx[k] + sh[k] + ar[k] * ps[k]);
#pragma omp simd
      for (int64_t k = 3 * H; k < h4; ++k) s[k] = sigmoid(xr[k] * sx[k] + sh[k] + ar[k] * ps[k]);
      T *__restrict__ hr = e.h_new + r * e.ldh, *__restrict__ cn = e.c_new + r * e.ldcn;
#pragma omp simd
      for (int64_t j = 0; j < H; ++j) {
        const T cj = s[H + j] * cr[j] + s[j] * s[2 * H + j];
        cn[j] = cj;
        hr[j] = s[3 * H + j] * tanh_(sc[j] * cj + bc[j]);
      }
    }
  });
}

void train_forward(const at::Tensor& wx, const at::Tensor& a, const at::Tensor& c_prev,
                   const at::Tensor& gamma_x, const c10::optional<at::Tensor>& bias,
                   const at::Tensor& gamma_h, const at::Tensor& gamma_c, const at::Tensor& beta_c,
                   at::Tensor mean, at::Tensor invstd, at::Tensor act, at::Tensor c_new,
                   at::Tensor th, at::Tensor h_new, const c10::optional<at::Tensor>& observed,
                   bool given, double eps_x, double eps_h, double eps_c) {
  for (const auto& [t, name] : {std::pair{&wx, "wx"}, {&a, "a"}, {&c_prev, "c_prev"},
                                {&gamma_x, "gamma_x"}, {&gamma_h, "gamma_h"},
                                {&gamma_c, "gamma_c"}, {&beta_c, "beta_c"}, {&mean, "mean"},
                                {&invstd, "invstd"}, {&act, "act"}, {&c_new, "c_new"},
                                {&th, "th"}, {&h_new, "h_new"}})
    check_rows(*t, name);
  if (bias.has_value()) check_rows(*bias, "bias");
  if (observed.has_value())
    TORCH_CHECK(observed->dim() == 3 && observed->stride(2) == 1,
                "paperports_bnlstm: observed must be (3, 2, 4H) with contiguous columns");
  AT_DISPATCH_FLOATING_TYPES(wx.scalar_type(), "bn_lstm_train_forward", [&] {
    train_forward_impl<scalar_t>(wx, a, c_prev, gamma_x, bias, gamma_h, gamma_c, beta_c, mean,
                                 invstd, act, c_new, th, h_new, observed, given, eps_x, eps_h,
                                 eps_c);
  });
}

void train_backward(const at::Tensor& dh, const at::Tensor& d_out, const at::Tensor& act,
                    const at::Tensor& th, const at::Tensor& c_prev, const at::Tensor& c_new,
                    const at::Tensor& a, const at::Tensor& wx, const at::Tensor& gamma_x,
                    const at::Tensor& gamma_h, const at::Tensor& gamma_c, const at::Tensor& mean,
                    const at::Tensor& invstd, bool given, bool with_bias, at::Tensor dc,
                    at::Tensor d_a, at::Tensor d_wx, at::Tensor d_gamma, at::Tensor d_beta) {
  for (const auto& [t, name] :
       {std::pair{&dh, "dh"}, {&d_out, "d_out"}, {&act, "act"}, {&th, "th"},
        {&c_prev, "c_prev"}, {&c_new, "c_new"}, {&a, "a"}, {&wx, "wx"}, {&gamma_x, "gamma_x"},
        {&gamma_h, "gamma_h"}, {&gamma_c, "gamma_c"}, {&mean, "mean"}, {&invstd, "invstd"},
        {&dc, "dc"}, {&d_a, "d_a"}, {&d_wx, "d_wx"}, {&d_gamma, "d_gamma"},
        {&d_beta, "d_beta"}})
    check_rows(*t, name);
  AT_DISPATCH_FLOATING_TYPES(act.scalar_type(), "bn_lstm_train_backward", [&] {
    train_backward_impl<scalar_t>(dh, d_out, act, th, c_prev, c_new, a, wx, gamma_x, gamma_h,
                                  gamma_c, mean, invstd, given, with_bias, dc, d_a, d_wx,
                                  d_gamma, d_beta);
  });
}

// x @ W^T for the recurrent product: oneDNN's linear with the weight packed by the caller
// (as torch.nn.LSTM's CPU path), or torch.mm with W^T.
at::Tensor recurrent_product(const at::Tensor& h, const at::Tensor& weight, bool onednn) {
  if (!onednn) return at::mm(h, weight);
  static const auto linear =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mkldnn::_linear_pointwise", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                            const std::optional<at::Tensor>&, c10::string_view,
                            c10::List<std::optional<at::Scalar>>,
                            std::optional<c10::string_view>)>();
  return linear.call(h, weight, std::nullopt, "none", c10::List<std::optional<at::Scalar>>(),
                     std::nullopt);
}

// A whole evaluation pass of one layer and direction: per step the recurrent product and
// eval_rows. hs, cs (T + 1, B, H) hold h_0, c_0 in their first step; rows past a sequence's
// end (batch_sizes, non-increasing) keep their state. The shapes are checked once, and the
// steps reach their rows by pointer: a tensor view per operand and step cost about half as
// much as the elementwise pass at the bench's size (profiled).
void eval_sequence(const at::Tensor& wx, const at::Tensor& s_x, const at::Tensor& shift,
                   const at::Tensor& s_hh, const at::Tensor& s_c, const at::Tensor& b_c,
                   const at::Tensor& weight, bool onednn, at::IntArrayRef batch_sizes,
                   at::Tensor hs, at::Tensor cs) {
  TORCH_CHECK(wx.dim() == 3, "paperports_bnlstm: wx must be (T, B, 4H)");
  const int64_t steps = wx.size(0), batch = wx.size(1), h4 = wx.size(2), H = h4 / 4;
  TORCH_CHECK(h4 == 4 * H, "paperports_bnlstm: wx's last size must be 4H");
  TORCH_CHECK(batch_sizes.empty() || static_cast<int64_t>(batch_sizes.size()) == steps,
              "paperports_bnlstm: batch_sizes must have one count per step");
  for (const auto& [t, name] : {std::pair{&wx, "wx"}, {&hs, "hs"}, {&cs, "cs"}}) {
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 3 && t->stride(2) == 1 &&
                    t->scalar_type() == wx.scalar_type(),
                "paperports_bnlstm: ", name, " must be a CPU tensor (steps, rows, columns) "
                "of wx's dtype with contiguous columns");
  }
  TORCH_CHECK(hs.size(0) == steps + 1 && hs.size(1) == batch && hs.size(2) == H &&
                  cs.sizes() == hs.sizes(),
              "paperports_bnlstm: hs and cs must be (T + 1, B, H)");
  for (const auto& [t, name, width] :
       {std::tuple{&s_x, "s_x", h4}, {&shift, "shift", h4}, {&s_hh, "s_hh", h4},
        {&s_c, "s_c", H}, {&b_c, "b_c", H}}) {
    TORCH_CHECK(t->device().is_cpu() && t->dim() == 2 && t->size(0) == steps &&
                    t->size(1) == width && t->stride(1) == 1 &&
                    t->scalar_type() == wx.scalar_type(),
                "paperports_bnlstm: ", name, " must be a CPU matrix (T, ", width,
                ") of wx's dtype with contiguous columns");
  }
  int64_t previous = batch;
  for (const int64_t n : batch_sizes) {
    TORCH_CHECK(n >= 0 && n <= previous, "paperports_bnlstm: batch_sizes must be non-increasing "
                "counts of at most the batch");
    previous = n;
  }
  AT_DISPATCH_FLOATING_TYPES(wx.scalar_type(), "bn_lstm_eval_sequence", [&] {
    using T = scalar_t;
    const T* px = wx.data_ptr<T>();
    T *ph = hs.data_ptr<T>(), *pc = cs.data_ptr<T>();
    const int64_t tx = wx.stride(0), ldx = wx.stride(1);
    const int64_t th = hs.stride(0), ldh = hs.stride(1), tc = cs.stride(0), ldc = cs.stride(1);
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t n = batch_sizes.empty() ? batch : batch_sizes[t];
      if (n < batch) {  // finished rows keep their state
        hs.select(0, t + 1).narrow(0, n, batch - n).copy_(hs.select(0, t).narrow(0, n, batch - n));
        cs.select(0, t + 1).narrow(0, n, batch - n).copy_(cs.select(0, t).narrow(0, n, batch - n));
      }
      if (n == 0) continue;
      at::Tensor h_prev = hs.select(0, t);
      const at::Tensor a =
          recurrent_product(n < batch ? h_prev.narrow(0, 0, n) : h_prev, weight, onednn);
      TORCH_CHECK(a.dim() == 2 && a.size(0) == n && a.size(1) == h4 && a.stride(1) == 1,
                  "paperports_bnlstm: the recurrent product must be (n, 4H) by rows");
      const EvalRows<T> e{px + t * tx,
                          s_x.data_ptr<T>() + t * s_x.stride(0),
                          shift.data_ptr<T>() + t * shift.stride(0),
                          a.data_ptr<T>(),
                          s_hh.data_ptr<T>() + t * s_hh.stride(0),
                          pc + t * tc,
                          s_c.data_ptr<T>() + t * s_c.stride(0),
                          b_c.data_ptr<T>() + t * b_c.stride(0),
                          ph + (t + 1) * th,
                          pc + (t + 1) * tc,
                          ldx,
                          a.stride(0),
                          ldc,
                          ldh,
                          ldc};
      eval_rows(e, n, H);
    }
  });
}

// A whole training forward of one layer and direction: per step the recurrent product and
// train_forward, with BNLSTMSequence's buffers (hs, cs hold h_0, c_0 in their first step).
// Steps where one row runs, or every step with all_fixed, read the given statistics
// `fixed` (3, 2, T, 4H). Returns the recurrent products W_h h_{t-1} of the steps that ran,
// which the backward reads.
std::vector<at::Tensor> train_forward_sequence(
    const at::Tensor& wx, const at::Tensor& weight, bool onednn, const at::Tensor& gamma_x,
    const c10::optional<at::Tensor>& bias, const at::Tensor& gamma_h, const at::Tensor& gamma_c,
    const at::Tensor& beta_c, const c10::optional<at::Tensor>& fixed, bool all_fixed,
    at::IntArrayRef batch_sizes, double eps_x, double eps_h, double eps_c, at::Tensor hs,
    at::Tensor cs, at::Tensor act, at::Tensor th, at::Tensor mean, at::Tensor invstd,
    const c10::optional<at::Tensor>& observed) {
  const int64_t steps = wx.size(0), batch = wx.size(1);
  TORCH_CHECK(static_cast<int64_t>(batch_sizes.size()) == steps,
              "paperports_bnlstm: batch_sizes must have one count per step");
  std::vector<at::Tensor> products;
  products.reserve(static_cast<size_t>(steps));
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t n = batch_sizes[t];
    if (n < batch) {  // finished rows keep their state
      hs[t + 1].copy_(hs[t]);
      cs[t + 1].copy_(cs[t]);
    }
    if (n == 0) continue;
    at::Tensor m = mean.select(1, t), inv = invstd.select(1, t);
    const bool given = n == 1 || all_fixed;
    if (given) {
      TORCH_CHECK(fixed.has_value(), "paperports_bnlstm: a step needs the given statistics");
      m.copy_(fixed->select(1, 0).select(1, t));
      inv.copy_(fixed->select(1, 1).select(1, t));
    }
    at::Tensor a = recurrent_product(hs[t].narrow(0, 0, n), weight, onednn);
    c10::optional<at::Tensor> obs;
    if (observed.has_value() && n > 1) obs = observed->select(2, t);
    train_forward(wx[t].narrow(0, 0, n), a, cs[t].narrow(0, 0, n), gamma_x, bias, gamma_h,
                  gamma_c, beta_c, m, inv, act[t].narrow(0, 0, n), cs[t + 1].narrow(0, 0, n),
                  th[t].narrow(0, 0, n), hs[t + 1].narrow(0, 0, n), obs, given, eps_x, eps_h,
                  eps_c);
    products.push_back(std::move(a));
  }
  return products;
}

// The whole training backward, from the outputs' gradient d_out (T, B, H) and the last
// state's (dh, dc, updated in place to the initial state's): per step train_backward and
// dh_{t-1} = dA_t W_h (back_weight: W_h^T, packed as for recurrent_product).
void train_backward_sequence(
    const at::Tensor& d_out, const at::Tensor& act, const at::Tensor& th, const at::Tensor& cs,
    const at::Tensor& wx, at::TensorList products, const at::Tensor& back_weight, bool onednn,
    const at::Tensor& gamma_x, const at::Tensor& gamma_h, const at::Tensor& gamma_c,
    const at::Tensor& mean, const at::Tensor& invstd, at::IntArrayRef batch_sizes,
    bool all_fixed, bool with_bias, at::Tensor dh, at::Tensor dc, at::Tensor d_a,
    at::Tensor d_wx, at::Tensor d_gamma, at::Tensor d_beta) {
  const int64_t steps = wx.size(0);
  int64_t k = static_cast<int64_t>(products.size());
  for (int64_t t = steps - 1; t >= 0; --t) {
    const int64_t n = batch_sizes[t];
    if (n == 0) continue;
    TORCH_CHECK(k > 0, "paperports_bnlstm: one recurrent product per step that ran");
    --k;
    at::Tensor da = d_a[t].narrow(0, 0, n);
    train_backward(dh.narrow(0, 0, n), d_out[t].narrow(0, 0, n), act[t].narrow(0, 0, n),
                   th[t].narrow(0, 0, n), cs[t].narrow(0, 0, n), cs[t + 1].narrow(0, 0, n),
                   products[k], wx[t].narrow(0, 0, n), gamma_x, gamma_h, gamma_c,
                   mean.select(1, t), invstd.select(1, t), n == 1 || all_fixed, with_bias,
                   dc.narrow(0, 0, n), da, d_wx[t].narrow(0, 0, n), d_gamma, d_beta);
    dh.narrow(0, 0, n).copy_(recurrent_product(da, back_weight, onednn));
  }
}

}  // namespace

TORCH_LIBRARY(paperports_bnlstm, m) {
  m.def(
      "train_forward_sequence(Tensor wx, Tensor weight, bool onednn, Tensor gamma_x, "
      "Tensor? bias, Tensor gamma_h, Tensor gamma_c, Tensor beta_c, Tensor? fixed, "
      "bool all_fixed, int[] batch_sizes, float eps_x, float eps_h, float eps_c, "
      "Tensor(a!) hs, Tensor(b!) cs, Tensor(c!) act, Tensor(d!) th, Tensor(e!) mean, "
      "Tensor(f!) invstd, Tensor(g!)? observed) -> Tensor[]");
  m.def(
      "train_backward_sequence(Tensor d_out, Tensor act, Tensor th, Tensor cs, Tensor wx, "
      "Tensor[] products, Tensor back_weight, bool onednn, Tensor gamma_x, Tensor gamma_h, "
      "Tensor gamma_c, Tensor mean, Tensor invstd, int[] batch_sizes, bool all_fixed, "
      "bool with_bias, Tensor(a!) dh, Tensor(b!) dc, Tensor(c!) d_a, Tensor(d!) d_wx, "
      "Tensor(e!) d_gamma, Tensor(f!) d_beta) -> ()");
  m.def(
      "eval_sequence(Tensor wx, Tensor s_x, Tensor shift, Tensor s_hh, Tensor s_c, "
      "Tensor b_c, Tensor weight, bool onednn, int[] batch_sizes, Tensor(a!) hs, "
      "Tensor(b!) cs) -> ()");
}

TORCH_LIBRARY_IMPL(paperports_bnlstm, CPU, m) {
  m.impl("eval_sequence", &eval_sequence);
  m.impl("train_forward_sequence", &train_forward_sequence);
  m.impl("train_backward_sequence", &train_backward_sequence);
}

// oneDNN's packed weight is an MkldnnCPU tensor: the sequence's dispatch key when given one.
TORCH_LIBRARY_IMPL(paperports_bnlstm, MkldnnCPU, m) {
  m.impl("eval_sequence", &eval_sequence);
  m.impl("train_forward_sequence", &train_forward_sequence);
  m.impl("train_backward_sequence", &train_backward_sequence);
}
