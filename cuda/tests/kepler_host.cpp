// Host build of the Kepler solver in crates/ops/src/kepler/kepler.cu: checks its backward error
// |E - e sin E - M| (mod 2 pi) on a few million points, in float and double, and
// that large M (up to the largest finite) are reduced exactly: E - e sin E equals
// M on the circle, with libm's sin/cos of M (exactly reduced) as the reference.
// Run by cuda/check_ptx.py when a C++ compiler is available.
#include "kepler.cu"

#include <cmath>
#include <cstdio>
#include <random>

template <class T>
static bool run(const char* name, double tol) {
    std::mt19937_64 g(1);
    std::uniform_real_distribution<double> u(0, 1);
    double worst = 0, wm = 0, we = 0;
    long bad = 0;
    const long n = 2000000;
    for (long i = 0; i < n; ++i) {
        double md = 40 * u(g) - 20, ed;
        switch (i % 4) {
            case 0: ed = 0.9999 * u(g); break;
            case 1: ed = 0.9999 - 1e-3 * u(g); break;                     // near-parabolic
            case 2: ed = 0.9999 * u(g); md = 1e-3 * (u(g) - 0.5); break;  // small M
            default: ed = 0.99 + 0.0099 * u(g); md = 0.1 * (u(g) - 0.5);  // the hard corner
        }
        T M = (T)md, e = (T)ed;
        if (!(e <= (T)0.9999)) e = (T)0.9999;
        T s, c;
        kepler_solve<T>(M, e, &s, &c);
        const double E = std::atan2((double)s, (double)c);
        const double f = std::remainder(E - (double)e * std::sin(E) - (double)M, 2 * M_PI);
        if (std::fabs(f) > worst) worst = std::fabs(f), wm = M, we = e;
        if (!(std::fabs(f) <= tol)) ++bad;
    }
    T s[4], c[4];
    kepler_solve<T>((T)1, (T)1, &s[0], &c[0]);
    kepler_solve<T>((T)1, (T)-0.1, &s[1], &c[1]);
    kepler_solve<T>((T)NAN, (T)0.5, &s[2], &c[2]);
    kepler_solve<T>((T)0, (T)0.5, &s[3], &c[3]);
    const bool nans = std::isnan(s[0]) && std::isnan(c[0]) && std::isnan(s[1]) && std::isnan(s[2]);
    const bool zero = s[3] == 0 && c[3] == 1;
    std::printf("kepler_host %s: worst backward error %.3e (tolerance %.0e) at M=%.9g e=%.9g; %ld over; NaN cases %s; M=0 %s\n",
                name, worst, tol, wm, we, bad, nans ? "ok" : "WRONG", zero ? "ok" : "WRONG");
    return bad == 0 && nans && zero;
}

template <class T>
static bool run_large(const char* name, double tol) {
    std::mt19937_64 g(2);
    std::uniform_real_distribution<double> u(1, 2);
    const double fixed[] = {1e15, 1e16, 1e17, 1e20, 1e300, -1e300, 1.7976931348623157e308, 134217728.0,
                            -134217728.0, 3.4028234663852886e38, 6381956970095103.0 * std::ldexp(1.0, 797)};
    const int top = sizeof(T) == 8 ? 1023 : 127;
    double worst = 0, wm = 0, we = 0;
    long bad = 0, count = 0;
    const double es[] = {0.0, 0.5, 0.9};
    for (double ed : es) {
        for (int i = 0; i < (int)(sizeof(fixed) / sizeof(fixed[0])) + 3 * (top - 19); ++i) {
            const int k = i - (int)(sizeof(fixed) / sizeof(fixed[0]));
            const double md = k < 0 ? fixed[i] : std::ldexp(u(g), 20 + k / 3) * (k % 2 ? -1 : 1);
            const T M = (T)md, e = (T)ed;
            if (!std::isfinite((double)M)) continue;
            T s, c;
            kepler_solve<T>(M, e, &s, &c);
            const double lhs = std::atan2((double)s, (double)c) - (double)e * (double)s;
            const double f = std::fmax(std::fabs(std::sin(lhs) - std::sin((double)M)),
                                       std::fabs(std::cos(lhs) - std::cos((double)M)));
            ++count;
            if (!(f <= worst)) worst = f, wm = M, we = e;
            if (!(f <= tol)) ++bad;
        }
    }
    std::printf("kepler_host %s large M: worst |(sin, cos)(E - e sin E) - (sin, cos)(M)| %.3e (tolerance %.0e) at M=%.9g e=%.3g; %ld of %ld over\n",
                name, worst, tol, wm, we, bad, count);
    return bad == 0;
}

// The tangent and cotangent near the singular corner (e -> 1, E -> 0): relative
// error of 1 / (1 - e cos E) against (1 - e) + 2 e sin^2(E/2) in double, which has
// no cancellation (1 - e * c lost 2e-4 in float at e = 0.9999).
template <class T>
static bool run_derivative(const char* name, double e, double tol) {
    double worst = 0, we = 0;
    for (int k = 0; k < 80; ++k) {
        const double ea = 1e-9 * std::pow(1.3, k);
        const T et = (T)e, s = (T)std::sin(ea), c = (T)std::cos(ea);
        const double want = 1 / ((1 - (double)et) + 2 * (double)et * std::pow(std::sin(ea / 2), 2));
        T d0, d1, m0, m1;
        kepler_tangent_one<T>(T(1), T(0), et, s, c, &d0, &d1);
        kepler_cotangent_one<T>(T(1), T(0), et, s, c, &m0, &m1);
        for (double got : {(double)d0 / (double)c, (double)m0 / (double)c}) {
            const double err = std::fabs(got - want) / want;
            if (err > worst) worst = err, we = ea;
        }
    }
    std::printf("kepler_host %s derivative at e=%.17g: worst relative error %.3e (tolerance %g) at E=%g\n", name, e,
                worst, tol, we);
    return worst <= tol;
}

int main() {
    const bool t = run_derivative<double>("f64", 1 - 1e-12, 1e-14) && run_derivative<float>("f32", 0.9999, 2e-6);
    const bool a = run<double>("f64", 1e-12);
    const bool b = run<float>("f32", 2e-5);
    const bool c = run_large<double>("f64", 1e-14);
    const bool d = run_large<float>("f32", 2e-6);
    return a && b && c && d && t ? 0 : 1;
}
