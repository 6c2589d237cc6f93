// Host build of the Kepler solver in ../kepler.cu: checks its backward error
// |E - e sin E - M| (mod 2 pi) on a few million points, in float and double.
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

int main() {
    const bool a = run<double>("f64", 1e-12);
    const bool b = run<float>("f32", 2e-5);
    return a && b ? 0 : 1;
}
