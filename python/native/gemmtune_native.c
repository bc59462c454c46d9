/* gemmtune_native: the Python package's hot path calls gemmtune_matmul through this module
 * rather than through ctypes, whose conversion of 14 arguments costs microseconds a call.
 * It links nothing: the package binds it to the address of gemmtune_matmul in the libgemmtune
 * it loaded (bind), so module and library can never disagree. Built against Python's stable
 * ABI (abi3), one file serves every Python from 3.10 on. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*matmul_fn)(int device, void* desc, int64_t m, int64_t n, int64_t k,
                         const float* alpha, const void* a, int64_t lda, const void* b,
                         int64_t ldb, const float* beta, void* c, int64_t ldc, void* stream);

static matmul_fn bound_matmul = NULL;

/* bind(address): the address of gemmtune_matmul (ctypes.cast(fn, c_void_p).value). */
static PyObject* bind(PyObject* self, PyObject* address) {
  (void)self;
  void* fn = PyLong_AsVoidPtr(address);
  if (fn == NULL && PyErr_Occurred()) return NULL;
  if (fn == NULL) {
    PyErr_SetString(PyExc_ValueError, "bind: the address of gemmtune_matmul is null");
    return NULL;
  }
  bound_matmul = (matmul_fn)fn;
  Py_RETURN_NONE;
}

/* Every argument an int: integers, and addresses (0 for none). */
static int read_args(PyObject* const* args, int64_t* ints, void** addresses) {
  static const int is_address[14] = {0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 1};
  for (int i = 0; i < 14; ++i) {
    if (is_address[i]) {
      addresses[i] = PyLong_AsVoidPtr(args[i]);
    } else {
      ints[i] = PyLong_AsLongLong(args[i]);
    }
    if (PyErr_Occurred()) return -1;
  }
  return 0;
}

/* matmul(device, desc, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream) -> status, the
 * arguments of gemmtune_matmul as ints (alpha, beta: addresses of host floats). */
static PyObject* matmul(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 14) {
    PyErr_Format(PyExc_TypeError, "matmul takes 14 arguments (%zd given)", nargs);
    return NULL;
  }
  if (bound_matmul == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "matmul: bind() the library's gemmtune_matmul first");
    return NULL;
  }
  int64_t ints[14] = {0};
  void* addresses[14] = {0};
  if (read_args(args, ints, addresses) != 0) return NULL;
  const int status = bound_matmul((int)ints[0], addresses[1], ints[2], ints[3], ints[4],
                                  (const float*)addresses[5], addresses[6], ints[7], addresses[8],
                                  ints[9], (const float*)addresses[10], addresses[11], ints[12],
                                  addresses[13]);
  return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(address): the address of gemmtune_matmul"},
    {"matmul", (PyCFunction)(void (*)(void))matmul, METH_FASTCALL,
     "matmul(device, desc, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream) -> status"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gemmtune_native",
    "gemmtune_matmul without ctypes, for the package's planned calls", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_gemmtune_native(void) {
  return PyModule_Create(&module);
}
