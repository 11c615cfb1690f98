"""Build and launch sglang 0.5.23's CUDA KDA packed-decode kernel (`kda_packed_decode.cuh`) without sglang.

sglang compiles that header at run time through its own JIT layer (tvm-ffi and its `sgl_kernel` headers),
which this benchmark does not carry. The header's device code needs only a handful of helpers (the bf16 and
fp32 type names, a conversion, a warp sum and the two programmatic-dependent-launch instructions); this
module supplies its own versions of them, takes the header's device part (everything before the host-side
launcher struct) from the wheel at run time, adds a C launcher, and builds a shared library with nvcc for
sm_90a. Nothing of sglang's source is stored in this repository.

The launch mirrors sglang's: one block of 8 warps per (row, value head), programmatic dependent launch on
(sglang enables it on Hopper). The kernel covers what sglang's `covered()` admits: K = V = 128, an fp32
state, bf16 activations, int32 slot indices; sglang takes it for B >= 8 and its Triton kernel below that.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
import tempfile
import zipfile
from pathlib import Path

import torch

CUH = "sglang/kernels/jit/csrc/attention/kda_packed_decode.cuh"
WARPS = 8

# Our own stand-ins for the sgl_kernel helpers the device code uses.
_PRELUDE = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>
using bf16_t = __nv_bfloat16;
using fp32_t = float;
namespace device {
template <typename T> __device__ __forceinline__ T cast(float x);
template <> __device__ __forceinline__ float cast<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 cast<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <typename T> __device__ __forceinline__ T cast(__nv_bfloat16 x);
template <> __device__ __forceinline__ float cast<float>(__nv_bfloat16 x) { return __bfloat162float(x); }
namespace warp {
template <int N> __device__ __forceinline__ float reduce_sum(float x) {
#pragma unroll
  for (int m = N / 2; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
}  // namespace warp
template <bool E> __device__ __forceinline__ void PDLWaitPrimary() {
  if constexpr (E) asm volatile("griddepcontrol.wait;" ::: "memory");
}
template <bool E> __device__ __forceinline__ void PDLTriggerSecondary() {
  if constexpr (E) asm volatile("griddepcontrol.launch_dependents;" :::);
}
}  // namespace device
"""

_LAUNCHER = r"""
extern "C" int gdr_kda_cuda_launch(
    const void* mixed, const void* a, const void* b, const void* A_log, const void* dt_bias, void* o, void* state,
    const void* indices, long long stride_mixed, long long stride_a, long long stride_b, long long stride_state,
    unsigned H, unsigned HV, float scale, float lower_bound, int use_lower_bound, unsigned batch, int pdl,
    void* stream) {
  sglang::KdaPackedDecodeParams p;
  p.mixed_qkv = static_cast<const bf16_t*>(mixed);
  p.a = static_cast<const bf16_t*>(a);
  p.b = static_cast<const bf16_t*>(b);
  p.A_log = static_cast<const fp32_t*>(A_log);
  p.dt_bias = static_cast<const fp32_t*>(dt_bias);
  p.o = static_cast<bf16_t*>(o);
  p.state = static_cast<fp32_t*>(state);
  p.indices = static_cast<const int32_t*>(indices);
  p.stride_mixed = stride_mixed;
  p.stride_a = stride_a;
  p.stride_b = stride_b;
  p.stride_state = stride_state;
  p.H = H;
  p.HV = HV;
  p.scale = scale;
  p.lower_bound = lower_bound;
  p.use_lower_bound = use_lower_bound;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(batch * HV);
  config.blockDim = dim3(WARPS * 32);
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  cudaError_t error = pdl ? cudaLaunchKernelEx(&config, sglang::kda_packed_decode_kernel<WARPS, true>, p)
                          : cudaLaunchKernelEx(&config, sglang::kda_packed_decode_kernel<WARPS, false>, p);
  return static_cast<int>(error);
}
"""


def device_part(header: str) -> str:
    """The header's device code: its includes dropped and the host launcher struct (tvm-ffi) cut off."""
    struct = header.find("struct KdaPackedDecodeKernel")
    if struct < 0 or "kda_packed_decode_kernel" not in header:
        raise RuntimeError("kda_packed_decode.cuh does not have the expected kernel and launcher struct")
    cut = header.rfind("template", 0, struct)
    body = header[:cut] + "\n}  // namespace sglang\n"
    return re.sub(r"^\s*#include[^\n]*$", "", body, flags=re.MULTILINE)


def read_header(source: str | os.PathLike) -> str:
    path = Path(source)
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            return archive.read(CUH).decode()
    if path.is_dir():
        for candidate in (path / CUH, path / "python" / CUH):
            if candidate.is_file():
                return candidate.read_text()
        raise FileNotFoundError(f"no {CUH} under {path}")
    return path.read_text()


class SglangCudaKda:
    """sglang's CUDA KDA decode kernel, built once per process; `__call__` takes the packed-decode arguments."""

    def __init__(self, source: str | os.PathLike, pdl: bool = True, build_dir: str | None = None) -> None:
        code = _PRELUDE + f"#define WARPS {WARPS}\n" + device_part(read_header(source)) + _LAUNCHER
        digest = hashlib.sha256(code.encode()).hexdigest()[:16]
        directory = Path(build_dir or tempfile.mkdtemp(prefix="gdr_kda_cuda_"))
        directory.mkdir(parents=True, exist_ok=True)
        cu, lib = directory / f"kda_{digest}.cu", directory / f"kda_{digest}.so"
        cu.write_text(code)
        command = ["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
                   "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-o", str(lib), str(cu)]
        built = subprocess.run(command, capture_output=True, text=True)
        self.build_log = built.stdout + built.stderr
        if built.returncode != 0:
            raise RuntimeError(f"nvcc failed ({built.returncode}): {self.build_log[-2000:]}")
        self._lib = ctypes.CDLL(str(lib))
        fn = self._lib.gdr_kda_cuda_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_longlong] * 4 + [
            ctypes.c_uint, ctypes.c_uint, ctypes.c_float, ctypes.c_float, ctypes.c_int, ctypes.c_uint, ctypes.c_int,
            ctypes.c_void_p]
        self._fn = fn
        self.pdl = pdl

    @staticmethod
    def covered(mixed_qkv: torch.Tensor, a: torch.Tensor, state: torch.Tensor) -> bool:
        """What this kernel computes correctly: sglang's covered() less its B >= 8 dispatch choice."""
        HV, V, K = state.shape[-3:]
        return (K == 128 and V == 128 and state.dtype == torch.float32 and mixed_qkv.dtype == torch.bfloat16
                and a.shape[-1] == HV * K)

    def __call__(self, mixed_qkv, a, b, A_log, dt_bias, scale, state, out, indices, use_qk_l2norm_in_kernel=True,
                 lower_bound=None):
        assert use_qk_l2norm_in_kernel, "the CUDA kernel always normalises q and k"
        B = mixed_qkv.shape[0]
        HV, V, K = state.shape[-3:]
        H = (mixed_qkv.shape[1] - HV * V) // (2 * K)
        if B == 0:
            return out, state
        error = self._fn(
            mixed_qkv.data_ptr(), a.data_ptr(), b.data_ptr(), A_log.data_ptr(), dt_bias.data_ptr(), out.data_ptr(),
            state.data_ptr(), indices.data_ptr(), mixed_qkv.stride(0), a.stride(0), b.stride(0), state.stride(0),
            H, HV, float(scale), float(lower_bound or 0.0), int(lower_bound is not None), B, int(self.pdl),
            torch.cuda.current_stream().cuda_stream)
        if error:
            raise RuntimeError(f"CUDA KDA launch failed: cudaError {error}")
        return out, state
