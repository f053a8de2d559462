/* tilelab's native launch call: cuLaunchKernel from C, for prepared launches.
 *
 * Why: a repeated launch spends most of its host time in the binding call itself
 * (cuda-bindings converts eleven Python arguments and wraps the result on every call).
 * A prepared launch knows all eleven once, so it packs them here into a small record
 * (a capsule) and each launch is then one C call with one argument.
 *
 * Built by tilelab.runtime.native with the system C compiler at first use (no CUDA
 * headers needed: the two driver entry points are declared below and looked up in
 * libcuda at run time). Python falls back to cuda-bindings when it cannot be built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdint.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shmem, void *stream,
                         void **params, void **extra);
typedef int (*sync_fn)(void *stream);

/* cuLaunchKernelEx's configuration, as cuda.h (CUDA 12 and 13) lays it out: an
 * attribute is its id padded to 8 bytes and a 64-byte value union. */
typedef struct {
    int id;
    char pad[4];
    union { char bytes[64]; int programmatic_stream_serialization_allowed; } value;
} launch_attribute_t;

typedef struct {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
    void *stream;
    launch_attribute_t *attrs;
    unsigned num_attrs;
} launch_config_t;

typedef int (*launch_ex_fn)(const launch_config_t *config, void *f, void **params,
                            void **extra);

/* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
#define ATTR_PROGRAMMATIC_STREAM_SERIALIZATION 6

static launch_fn cu_launch = NULL;
static launch_ex_fn cu_launch_ex = NULL;   /* NULL: no programmatic dependent launch */
static sync_fn cu_sync = NULL;

typedef struct {
    void *func;
    unsigned grid[3];
    void *stream;
    void **params;
    int pdl;        /* launch with programmatic stream serialization allowed */
} prepared_t;

/* One launch of p on stream: cuLaunchKernelEx with the programmatic-dependent-launch
 * attribute when p asks for it (and the driver has it), else cuLaunchKernel. */
static int do_launch(const prepared_t *p, void *stream) {
    if (p->pdl && cu_launch_ex != NULL) {
        launch_attribute_t attr = {0};
        attr.id = ATTR_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmatic_stream_serialization_allowed = 1;
        launch_config_t cfg = {{p->grid[0], p->grid[1], p->grid[2]}, {1, 1, 1}, 0, stream,
                               &attr, 1};
        return cu_launch_ex(&cfg, p->func, p->params, NULL);
    }
    return cu_launch(p->func, p->grid[0], p->grid[1], p->grid[2], 1, 1, 1, 0, stream,
                     p->params, NULL);
}

static const char *CAPSULE = "tilelab.native_launch";

static void free_prepared(PyObject *cap) {
    PyMem_Free(PyCapsule_GetPointer(cap, CAPSULE));
}

/* init(libcuda_path): look up the driver entry points (idempotent). */
static PyObject *nl_init(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, dlerror());
        return NULL;
    }
    launch_fn l = (launch_fn)dlsym(lib, "cuLaunchKernel");
    sync_fn s = (sync_fn)dlsym(lib, "cuStreamSynchronize");
    if (l == NULL || s == NULL) {
        PyErr_Format(PyExc_OSError, "%s has no cuLaunchKernel/cuStreamSynchronize", path);
        return NULL;
    }
    cu_launch = l;
    cu_sync = s;
    cu_launch_ex = (launch_ex_fn)dlsym(lib, "cuLaunchKernelEx");   /* optional */
    Py_RETURN_NONE;
}

static int as_pointer(PyObject *o, void **out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    *out = (void *)(uintptr_t)v;
    return 1;
}

/* prepare(function, gx, gy, gz, stream, params[, pdl]) -> capsule: one launch's
 * arguments (handles and the packed parameter array as ints; the caller keeps what
 * they point to alive as long as the capsule); pdl: launch with programmatic
 * dependent launch allowed. */
static PyObject *nl_prepare(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 6 && n != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "prepare(function, gx, gy, gz, stream, params[, pdl])");
        return NULL;
    }
    prepared_t p;
    p.pdl = 0;
    if (n == 7) {
        int t = PyObject_IsTrue(args[6]);
        if (t < 0) return NULL;
        p.pdl = t;
    }
    void *params;
    if (!as_pointer(args[0], &p.func) || !as_pointer(args[4], &p.stream) ||
        !as_pointer(args[5], &params))
        return NULL;
    for (int i = 0; i < 3; i++) {
        unsigned long v = PyLong_AsUnsignedLong(args[1 + i]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) return NULL;
        if (v == 0 || v > 0xffffffffUL) {
            PyErr_Format(PyExc_ValueError, "grid dimension %d is %lu", i, v);
            return NULL;
        }
        p.grid[i] = (unsigned)v;
    }
    p.params = (void **)params;
    prepared_t *heap = PyMem_Malloc(sizeof(prepared_t));
    if (heap == NULL) return PyErr_NoMemory();
    *heap = p;
    PyObject *cap = PyCapsule_New(heap, CAPSULE, free_prepared);
    if (cap == NULL) PyMem_Free(heap);
    return cap;
}

static PyObject *nl_result(int err) {
    return PyLong_FromLong(err); /* 0 is a cached small int */
}

/* launch(capsule) -> CUresult as int, on the prepared stream. */
static PyObject *nl_launch(PyObject *self, PyObject *cap) {
    prepared_t *p = PyCapsule_GetPointer(cap, CAPSULE);
    if (p == NULL) return NULL;
    if (cu_launch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "native launch used before init()");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS  /* the driver blocks while the launch queue is full */
    err = do_launch(p, p->stream);
    Py_END_ALLOW_THREADS
    return nl_result(err);
}

/* launch_on(capsule, stream) -> CUresult as int, on another stream. */
static PyObject *nl_launch_on(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "launch_on(prepared, stream)");
        return NULL;
    }
    prepared_t *p = PyCapsule_GetPointer(args[0], CAPSULE);
    void *stream;
    if (p == NULL || !as_pointer(args[1], &stream)) return NULL;
    if (cu_launch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "native launch used before init()");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = do_launch(p, stream);
    Py_END_ALLOW_THREADS
    return nl_result(err);
}

/* sync(stream) -> CUresult as int: cuStreamSynchronize without holding the GIL. */
static PyObject *nl_sync(PyObject *self, PyObject *arg) {
    void *stream;
    if (!as_pointer(arg, &stream)) return NULL;
    if (cu_sync == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "native launch used before init()");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = cu_sync(stream);
    Py_END_ALLOW_THREADS
    return nl_result(err);
}


/* ---- the async fast path ---------------------------------------------------------
 *
 * hot(prepared_launch, args) does what tilelab.runtime.launch.prepared.PreparedLaunch.run
 * does for a repeated kernel.launch_async(*args) on tilelab's default stream, in C: the same
 * checks in the same order, reading the prepared launch's own slots (so Python and C
 * share one state), then the driver call, the ledger record and the future. Whenever a
 * check would need more than a comparison (a stale launch, an unchecked block or graph
 * capture, freed memory, changed helpers, a context not current on this thread, work
 * pending on another stream, a new call site) it returns None
 * having launched nothing, and the Python path does the rest. Keep the two alike.
 */
static int hot_bound = 0;
static PyTypeObject *launch_type, *record_type, *future_type;
static PyObject *pin_type, *pkg_dir;
static PyObject *free_epoch, *special_modes, *logs, *push, *appended, *on_error;
static PyObject *s_ok, *s_helper_epoch, *s_bindings, *s_append;
/* slot offsets: PreparedLaunch, LaunchInfo, PreparedRecord, Future */
static Py_ssize_t o_match, o_definition, o_helpers, o_epoch, o_free_epoch, o_tls, o_info,
    o_fault, o_native, o_pin, o_caller, o_info_stream, o_r_info, o_r_site, o_r_offset,
    o_r_observed, o_r_keepalive, o_r_orphaned, o_r_event, o_f_record, o_f_error_map;

static int slot_offset(PyObject *type, const char *name, Py_ssize_t *out) {
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL) return 0;
    if (!Py_IS_TYPE(d, &PyMemberDescr_Type) ||
        ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member",
                     ((PyTypeObject *)type)->tp_name, name);
        Py_DECREF(d);
        return 0;
    }
    *out = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return 1;
}

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* bind_hot(launch_type, record_type, future_type, info_type, FREE_EPOCH, SPECIAL_MODES,
 *          logs, push, appended, on_error, pin_type, pkg_dir) */
static PyObject *nl_bind_hot(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 12) {
        PyErr_SetString(PyExc_TypeError, "bind_hot takes 12 arguments");
        return NULL;
    }
    hot_bound = 0; /* (a failed rebinding leaves the C path off, not half-bound) */
    for (int i = 0; i < 4; i++)
        if (!PyType_Check(a[i])) {
            PyErr_SetString(PyExc_TypeError, "bind_hot: the first four must be types");
            return NULL;
        }
    if (!PyList_Check(a[4]) || !PyList_Check(a[5]) || !PyDict_Check(a[6]) ||
        !PyUnicode_Check(a[11])) {
        PyErr_SetString(PyExc_TypeError, "bind_hot: FREE_EPOCH, SPECIAL_MODES must be "
                                         "lists, logs a dict and pkg_dir a str");
        return NULL;
    }
    if (!(slot_offset(a[0], "match", &o_match) &&
          slot_offset(a[0], "definition", &o_definition) &&
          slot_offset(a[0], "helpers", &o_helpers) && slot_offset(a[0], "epoch", &o_epoch) &&
          slot_offset(a[0], "free_epoch", &o_free_epoch) &&
          slot_offset(a[0], "tls", &o_tls) && slot_offset(a[0], "info", &o_info) &&
          slot_offset(a[0], "fault", &o_fault) && slot_offset(a[0], "native", &o_native) &&
          slot_offset(a[0], "pin", &o_pin) && slot_offset(a[0], "caller", &o_caller) &&
          slot_offset(a[3], "stream", &o_info_stream) &&
          slot_offset(a[1], "info", &o_r_info) && slot_offset(a[1], "_site", &o_r_site) &&
          slot_offset(a[1], "_offset", &o_r_offset) &&
          slot_offset(a[1], "observed", &o_r_observed) &&
          slot_offset(a[1], "keepalive", &o_r_keepalive) &&
          slot_offset(a[1], "orphaned", &o_r_orphaned) &&
          slot_offset(a[1], "event", &o_r_event) &&
          slot_offset(a[2], "_record", &o_f_record) &&
          slot_offset(a[2], "_error_map", &o_f_error_map)))
        return NULL;
    PyObject **keep[] = {(PyObject **)&launch_type, (PyObject **)&record_type,
                         (PyObject **)&future_type, &free_epoch, &special_modes, &logs,
                         &push, &appended, &on_error, &pin_type, &pkg_dir};
    PyObject *vals[] = {a[0], a[1], a[2], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]};
    for (int i = 0; i < 11; i++) Py_XSETREF(*keep[i], Py_NewRef(vals[i]));
    if (s_ok == NULL) {
        s_ok = PyUnicode_InternFromString("ok");
        s_helper_epoch = PyUnicode_InternFromString("helper_epoch");
        s_bindings = PyUnicode_InternFromString("bindings");
        s_append = PyUnicode_InternFromString("append");
        if (!s_ok || !s_helper_epoch || !s_bindings || !s_append) return NULL;
    }
    hot_bound = 1;
    Py_RETURN_NONE;
}

/* 1 when both slots hold equal objects, 0 otherwise (never an error) */
static int same_value(PyObject *x, PyObject *y) {
    if (x == NULL || y == NULL) return 0;
    int r = PyObject_RichCompareBool(x, y, Py_EQ);
    if (r < 0) PyErr_Clear();
    return r == 1;
}

/* Every (namespace dict, name, object) helper binding of the kernel still resolves to
 * its object, as HelperRegistry.changed() checks in Python (a notebook that redefines a
 * helper makes the kernel be re-checked). Anything unusual (not a list of 3-tuples over
 * exact dicts, a name bound to nothing) is left to the Python path. */
static int helpers_unchanged(PyObject *bindings) {
    if (!PyList_Check(bindings)) return 0;
    Py_ssize_t n = PyList_GET_SIZE(bindings);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(bindings, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) return 0;
        PyObject *ns = PyTuple_GET_ITEM(t, 0);
        if (!PyDict_CheckExact(ns)) return 0;
        PyObject *now = PyDict_GetItemWithError(ns, PyTuple_GET_ITEM(t, 1));
        if (now == NULL || now != PyTuple_GET_ITEM(t, 2)) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* _Same (launch/prepared.py: a scalar of a prepared launch's match, equal only to that very
 * object) and the offset of its "value" slot; NULL until bind_match */
static PyObject *same_type = NULL;
static Py_ssize_t o_same_value;

/* bind_match(same_type): let args_match read _Same objects without calling their __eq__ */
static PyObject *nl_bind_match(PyObject *self, PyObject *arg) {
    Py_ssize_t off;
    if (!PyType_Check(arg) || !slot_offset(arg, "value", &off)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bind_match(same_type)");
        return NULL;
    }
    o_same_value = off;
    Py_XSETREF(same_type, Py_NewRef(arg));
    Py_RETURN_NONE;
}

/* the referent of weak reference or proxy r (a new reference), or NULL: dead (no error
 * set) */
static PyObject *referent(PyObject *r) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o;
    if (PyWeakref_GetRef(r, &o) != 1) { /* dead (0) or an error (-1) */
        PyErr_Clear();
        return NULL;
    }
    return o;
#else
    PyObject *o = PyWeakref_GetObject(r); /* borrowed; None once dead */
    if (o == NULL) PyErr_Clear();
    return o == NULL || o == Py_None ? NULL : Py_NewRef(o);
#endif
}

/* args == match, decided in C for what launch._match_of builds: a _Same is equal only to
 * its very object, a weak proxy only to its live referent (tensors and partitions
 * compare by identity). Anything else goes through ==. Why: the Python __eq__ of each
 * scalar (nine for a library GEMM) was a call back into Python on every launch. */
static int args_match(PyObject *args, PyObject *match) {
    if (!PyTuple_CheckExact(args) || !PyTuple_CheckExact(match)) return same_value(args, match);
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != PyTuple_GET_SIZE(match)) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i), *m = PyTuple_GET_ITEM(match, i);
        if (same_type != NULL && (PyObject *)Py_TYPE(m) == same_type) {
            if (SLOT(m, o_same_value) != x) return 0;
        } else if (PyWeakref_CheckProxy(m)) {
            PyObject *r = referent(m);
            if (r == NULL) return 0;
            Py_DECREF(r);   /* (only its identity is compared) */
            if (r != x) return 0;
        } else if (!same_value(x, m)) {
            return 0;
        }
    }
    return 1;
}

static PyObject *nl_hot(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "hot(prepared_launch, args)");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030B0000
    Py_RETURN_NONE; /* (PyFrame_GetLasti is 3.11+: the Python path serves 3.10) */
#else
    PyObject *fast = a[0], *args = a[1];
    if (!hot_bound || cu_launch == NULL || Py_TYPE(fast) != launch_type) Py_RETURN_NONE;
    PyObject *nat = SLOT(fast, o_native), *match = SLOT(fast, o_match);
    if (nat == NULL || nat == Py_None || match == NULL || match == Py_None) Py_RETURN_NONE;
    prepared_t *p = PyCapsule_GetPointer(nat, CAPSULE);
    if (p == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    /* the very objects it was prepared for (a dead one raises ReferenceError: stale) */
    if (!args_match(args, match)) Py_RETURN_NONE;
    /* no unchecked block or capture open, nothing freed since, helpers unchanged */
    if (PyList_GET_SIZE(special_modes) < 1 || PyList_GET_SIZE(free_epoch) < 1)
        Py_RETURN_NONE;
    int special = PyObject_IsTrue(PyList_GET_ITEM(special_modes, 0));
    if (special != 0) {
        if (special < 0) PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!same_value(PyList_GET_ITEM(free_epoch, 0), SLOT(fast, o_free_epoch)))
        Py_RETURN_NONE;
    PyObject *definition = SLOT(fast, o_definition), *helpers = SLOT(fast, o_helpers);
    if (definition == NULL || helpers == NULL) Py_RETURN_NONE;
    PyObject *v = PyObject_GetAttr(definition, s_helper_epoch);
    int same = same_value(v, SLOT(fast, o_epoch));
    Py_XDECREF(v);
    v = PyObject_GetAttr(helpers, s_bindings);
    int helpers_same = v != NULL && helpers_unchanged(v);
    Py_XDECREF(v);
    if (!same || !helpers_same) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    /* the context is current on this thread */
    PyObject *tls = SLOT(fast, o_tls);
    v = tls == NULL ? NULL : PyObject_GetAttr(tls, s_ok);
    if (v == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_DECREF(v);
    /* no pending work on another stream (else the ledger must check) */
    PyObject *info = SLOT(fast, o_info);
    PyObject *key = info == NULL ? NULL : SLOT(info, o_info_stream);
    if (key == NULL) Py_RETURN_NONE;
    Py_ssize_t nlogs = PyDict_GET_SIZE(logs);
    if (nlogs && (nlogs != 1 || PyDict_Contains(logs, key) != 1)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    /* the user's line: above Kernel.launch_async, past tilelab's own frames (a library
     * function's), the code the Python path found and cached as the caller */
    PyFrameObject *f = PyEval_GetFrame();
    PyFrameObject *fr = f == NULL ? NULL : PyFrame_GetBack(f);
    PyCodeObject *code = NULL;
    while (fr != NULL) {
        code = PyFrame_GetCode(fr);
        if ((PyObject *)code == SLOT(fast, o_caller)) break;
        int inside = PyUnicode_Tailmatch(code->co_filename, pkg_dir, 0, PY_SSIZE_T_MAX, -1);
        Py_CLEAR(code);
        PyFrameObject *up = inside == 1 ? PyFrame_GetBack(fr) : NULL;
        Py_DECREF(fr);
        fr = up;
    }
    if (fr == NULL) { /* a new call site: the Python path learns it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int lasti = PyFrame_GetLasti(fr);
    Py_DECREF(fr);
    /* the arguments' pin that pending records share (a new one when none is pending) */
    PyObject *pinref = SLOT(fast, o_pin);
    PyObject *pin = pinref == NULL ? NULL : PyObject_CallNoArgs(pinref);
    if (pin == Py_None) {
        Py_DECREF(pin);
        pin = PyObject_CallOneArg(pin_type, args);
        PyObject *ref = pin == NULL ? NULL : PyWeakref_NewRef(pin, NULL);
        if (ref == NULL) Py_CLEAR(pin);
        else Py_XSETREF(SLOT(fast, o_pin), ref);
    }
    if (pin == NULL) {
        PyErr_Clear();
        Py_DECREF(code);
        Py_RETURN_NONE;
    }
    PyObject *offset = PyLong_FromLong(lasti);
    PyObject *rec = offset == NULL ? NULL : record_type->tp_alloc(record_type, 0);
    PyObject *fut = rec == NULL ? NULL : future_type->tp_alloc(future_type, 0);
    if (fut == NULL) {
        Py_XDECREF(rec);
        Py_XDECREF(offset);
        Py_DECREF(pin);
        Py_DECREF(code);
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = do_launch(p, p->stream);
    Py_END_ALLOW_THREADS
    SLOT(rec, o_r_info) = Py_NewRef(info);
    SLOT(rec, o_r_site) = (PyObject *)code;
    SLOT(rec, o_r_offset) = offset;
    /* (a failed launch's record is never pending: the future's __del__ then leaves it) */
    SLOT(rec, o_r_observed) = Py_NewRef(err ? Py_True : Py_False);
    SLOT(rec, o_r_keepalive) = pin;
    SLOT(rec, o_r_orphaned) = Py_NewRef(Py_False);
    SLOT(rec, o_r_event) = Py_NewRef(Py_None);
    SLOT(fut, o_f_record) = rec;
    PyObject *fault = SLOT(fast, o_fault);
    SLOT(fut, o_f_error_map) = Py_NewRef(fault == NULL ? Py_None : fault);
    if (err) { /* nothing launched: no record; on_error raises LaunchError */
        Py_DECREF(fut);
        PyObject *e = PyLong_FromLong(err);
        PyObject *r = e == NULL ? NULL : PyObject_CallFunctionObjArgs(on_error, fast, e, NULL);
        Py_XDECREF(e);
        Py_XDECREF(r);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "launch failed");
        return NULL;
    }
    /* the ledger (LEDGER.append inlined, as in Python) */
    PyObject *log = PyDict_GetItemWithError(logs, key);
    PyObject *r;
    if (log == NULL) {
        r = PyErr_Occurred() ? NULL : PyObject_CallOneArg(push, rec);
    } else {
        Py_INCREF(log);
        r = PyObject_CallMethodOneArg(log, s_append, rec);
        if (r != NULL) {
            Py_DECREF(r);
            PyObject *cur = PyDict_GetItemWithError(logs, key);
            Py_ssize_t len = PyObject_Length(log);
            if (len < 0 || (cur == NULL && PyErr_Occurred()))
                r = NULL;
            else if (cur != log || !(len & 255))
                r = PyObject_CallFunctionObjArgs(appended, log, rec, NULL);
            else
                r = Py_NewRef(Py_None);
        }
        Py_DECREF(log);
    }
    if (r == NULL) {
        Py_DECREF(fut);
        return NULL;
    }
    Py_DECREF(r);
    return fut;
#endif
}

/* call_key(kwnames, values, users, part, tensor_type) -> (kwnames, types, parts): the
 * kernel library's prepared-call key (tilelab.kernels._host.CallCache), built as the
 * Python code builds it: a tensor of exactly tensor_type by id (and appended to users),
 * None/bool/int/str/bytes by value, a float by its repr (which keeps -0.0 apart from
 * 0.0); anything else goes to part(value, users), whose exceptions propagate. Why:
 * keying ten arguments one Python call each was a third of a library call's host time. */
static PyObject *nl_call_key(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 5 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[1]) || !PyList_Check(a[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "call_key(kwnames: tuple, values: tuple, users: list, part, "
                        "tensor_type)");
        return NULL;
    }
    PyObject *values = a[1], *users = a[2], *part = a[3], *tensor_type = a[4];
    Py_ssize_t len = PyTuple_GET_SIZE(values);
    PyObject *types = PyTuple_New(len), *parts = PyTuple_New(len);
    if (types == NULL || parts == NULL) goto fail;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *v = PyTuple_GET_ITEM(values, i), *p;
        PyTypeObject *t = Py_TYPE(v);
        PyTuple_SET_ITEM(types, i, Py_NewRef((PyObject *)t));
        if ((PyObject *)t == tensor_type) {
            if (PyList_Append(users, v) < 0) goto fail;
            p = PyLong_FromVoidPtr(v);
        } else if (v == Py_None || t == &PyBool_Type || t == &PyLong_Type ||
                   t == &PyUnicode_Type || t == &PyBytes_Type) {
            p = Py_NewRef(v);
        } else if (t == &PyFloat_Type) {
            p = PyObject_Repr(v);
        } else {
            p = PyObject_CallFunctionObjArgs(part, v, users, NULL);
        }
        if (p == NULL) goto fail;
        PyTuple_SET_ITEM(parts, i, p);
    }
    PyObject *key = PyTuple_Pack(3, a[0], types, parts);
    Py_DECREF(types);
    Py_DECREF(parts);
    return key;
fail:
    Py_XDECREF(types);
    Py_XDECREF(parts);
    return NULL;
}

/* call_ids(kwargs, values) -> (*kwargs, *map(id, values)): the key under which the
 * kernel library's call cache files a call by the identities of its arguments
 * (tilelab.kernels._host.calls.CallCache._seen): the keyword names of dict kwargs in order,
 * then the id of each value, built in one C call; in Python the unpacking and the id()
 * of each value were a twentieth of a cached call's host time. */
static PyObject *make_ids(PyObject *kwargs, PyObject *values) {
    Py_ssize_t nk = PyDict_GET_SIZE(kwargs), nv = PyTuple_GET_SIZE(values);
    PyObject *ids = PyTuple_New(nk + nv);
    if (ids == NULL) return NULL;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(kwargs, &pos, &key, &value) && i < nk)
        PyTuple_SET_ITEM(ids, i++, Py_NewRef(key));
    if (i != nk) {
        Py_DECREF(ids);
        PyErr_SetString(PyExc_RuntimeError, "call_ids: kwargs changed size");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < nv; j++) {
        PyObject *id = PyLong_FromVoidPtr(PyTuple_GET_ITEM(values, j));
        if (id == NULL) {
            Py_DECREF(ids);
            return NULL;
        }
        PyTuple_SET_ITEM(ids, nk + j, id);
    }
    return ids;
}

static PyObject *nl_call_ids(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 2 || !PyDict_Check(a[0]) || !PyTuple_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "call_ids(kwargs: dict, values: tuple)");
        return NULL;
    }
    return make_ids(a[0], a[1]);
}

/* ---- the call cache's hit path ----------------------------------------------------
 *
 * call_hit(seen, kwargs, values) does what tilelab.kernels._host.calls.CallCache.prepare does
 * for a call filed under its arguments' identities (_Seen.ready, then _Entry.ready), in
 * C: the ids, the record, its weakly held tensors alive, its torch tensors' check
 * (TorchState.fast, which must say True), the entry alive and marked used, its launches
 * and result thawed. It returns the Ready; anything else (no record, a dead object, a
 * torch check that is not True, an unusual layout) returns the ids, having changed
 * nothing but the entry's mark, and the Python path decides as before. Why: those few
 * Python functions were a third of a repeated library call's host time. Keep the two
 * alike. */
static int calls_bound = 0;
static PyTypeObject *seen_type, *entry_type, *ready_type;
static Py_ssize_t o_s_weak, o_s_entry, o_s_at, o_s_fast, o_e_fixed, o_e_launches,
    o_e_result, o_e_single, o_e_used;

/* bind_calls(seen_type, entry_type, ready_type) */
static PyObject *nl_bind_calls(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    calls_bound = 0;
    if (n != 3 || !PyType_Check(a[0]) || !PyType_Check(a[1]) || !PyType_Check(a[2]) ||
        !PyType_IsSubtype((PyTypeObject *)a[2], &PyTuple_Type) ||
        ((PyTypeObject *)a[2])->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "bind_calls(seen_type, entry_type, ready_type: a "
                                         "tuple subclass without slots)");
        return NULL;
    }
    if (!(slot_offset(a[0], "weak", &o_s_weak) && slot_offset(a[0], "entry", &o_s_entry) &&
          slot_offset(a[0], "at", &o_s_at) && slot_offset(a[0], "fast", &o_s_fast) &&
          slot_offset(a[1], "fixed", &o_e_fixed) &&
          slot_offset(a[1], "launches", &o_e_launches) &&
          slot_offset(a[1], "result", &o_e_result) &&
          slot_offset(a[1], "single", &o_e_single) && slot_offset(a[1], "used", &o_e_used)))
        return NULL;
    PyObject **keep[] = {(PyObject **)&seen_type, (PyObject **)&entry_type,
                         (PyObject **)&ready_type};
    for (int i = 0; i < 3; i++) Py_XSETREF(*keep[i], Py_NewRef(a[i]));
    calls_bound = 1;
    Py_RETURN_NONE;
}

/* the referent of r, a weak reference (not a proxy: Python calls it), or NULL */
static PyObject *ref_referent(PyObject *r) {
    return r != NULL && PyWeakref_CheckRef(r) ? referent(r) : NULL;
}

/* _thaw: template with its weak positions replaced by their referents (a new reference);
 * NULL when one is gone or the layout is unusual (no error set) */
static PyObject *thaw(PyObject *template, PyObject *weak) {
    if (!PyTuple_Check(template) || !PyTuple_Check(weak)) return NULL;
    Py_ssize_t nw = PyTuple_GET_SIZE(weak), len = PyTuple_GET_SIZE(template);
    if (nw == 0) return Py_NewRef(template);
    PyObject *out = PyTuple_New(len);
    if (out == NULL) {
        PyErr_Clear();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(template, i)));
    for (Py_ssize_t j = 0; j < nw; j++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(weak, j));
        PyObject *o = i < 0 || i >= len ? NULL : ref_referent(PyTuple_GET_ITEM(template, i));
        if (o == NULL) {
            PyErr_Clear();
            Py_DECREF(out);
            return NULL;
        }
        Py_SETREF(PyTuple_GET_ITEM(out, i), o);
    }
    return out;
}

/* _Entry.ready in C: the Ready, or NULL (with no error) where Python must decide */
static PyObject *entry_ready(PyObject *entry) {
    PyObject *fixed = SLOT(entry, o_e_fixed), *res = SLOT(entry, o_e_result);
    PyObject *single = SLOT(entry, o_e_single), *launches;
    if (fixed == NULL || res == NULL || single == NULL || !PyTuple_Check(res) ||
        PyTuple_GET_SIZE(res) != 2)
        return NULL;
    if (fixed != Py_None) {
        if (!PyTuple_Check(fixed)) return NULL;
        launches = Py_NewRef(fixed);
    } else {
        PyObject *src = SLOT(entry, o_e_launches);
        if (src == NULL || !PyTuple_Check(src)) return NULL;
        Py_ssize_t nl = PyTuple_GET_SIZE(src);
        if ((launches = PyTuple_New(nl)) == NULL) {
            PyErr_Clear();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < nl; i++) {
            PyObject *t = PyTuple_GET_ITEM(src, i), *args, *pair;
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3 ||
                (args = thaw(PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2))) == NULL) {
                Py_DECREF(launches);
                return NULL;
            }
            pair = PyTuple_Pack(2, PyTuple_GET_ITEM(t, 0), args);
            Py_DECREF(args);
            if (pair == NULL) {
                PyErr_Clear();
                Py_DECREF(launches);
                return NULL;
            }
            PyTuple_SET_ITEM(launches, i, pair);
        }
    }
    PyObject *result = thaw(PyTuple_GET_ITEM(res, 0), PyTuple_GET_ITEM(res, 1)), *out;
    if (result == NULL || (single == Py_True && PyTuple_GET_SIZE(result) < 1)) {
        Py_XDECREF(result);
        Py_DECREF(launches);
        return NULL;
    }
    if (single == Py_True) {
        out = Py_NewRef(PyTuple_GET_ITEM(result, 0));
        Py_DECREF(result);
    } else {
        out = result;
    }
    PyObject *ready = ready_type->tp_alloc(ready_type, 2);
    if (ready == NULL) {
        PyErr_Clear();
        Py_DECREF(out);
        Py_DECREF(launches);
        return NULL;
    }
    PyTuple_SET_ITEM(ready, 0, out);
    PyTuple_SET_ITEM(ready, 1, launches);
    return ready;
}

/* _Seen.ready in C: 1 with *ready set, 0 where Python must decide, -1 on an error (the
 * torch check raised) */
static int seen_ready(PyObject *seen, PyObject *values, PyObject **ready) {
    PyObject *weak = SLOT(seen, o_s_weak), *at = SLOT(seen, o_s_at);
    if (weak == NULL || at == NULL || !PyTuple_Check(weak) || !PyTuple_Check(at)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(weak); i++) {
        PyObject *o = ref_referent(PyTuple_GET_ITEM(weak, i));
        if (o == NULL) return 0;
        Py_DECREF(o);
    }
    Py_ssize_t nat = PyTuple_GET_SIZE(at), nv = PyTuple_GET_SIZE(values);
    if (nat) {
        PyObject *fast = SLOT(seen, o_s_fast);
        if (fast == NULL || fast == Py_None) return 0;
        PyObject *xs = PyTuple_New(nat);
        if (xs == NULL) return -1;
        for (Py_ssize_t j = 0; j < nat; j++) {
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(at, j));
            if (i < 0 || i >= nv) {
                PyErr_Clear();
                Py_DECREF(xs);
                return 0;
            }
            PyTuple_SET_ITEM(xs, j, Py_NewRef(PyTuple_GET_ITEM(values, i)));
        }
        Py_INCREF(fast);
        PyObject *held = PyObject_CallOneArg(fast, xs);
        Py_DECREF(fast);
        Py_DECREF(xs);
        if (held == NULL) return -1;
        Py_DECREF(held);
        if (held != Py_True) return 0;
    }
    PyObject *entry = ref_referent(SLOT(seen, o_s_entry));
    if (entry == NULL) return 0;
    if (Py_TYPE(entry) != entry_type) {
        Py_DECREF(entry);
        return 0;
    }
    Py_XSETREF(SLOT(entry, o_e_used), Py_NewRef(Py_True));
    *ready = entry_ready(entry);
    Py_DECREF(entry);
    return *ready != NULL;
}

static PyObject *nl_call_hit(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 3 || !PyDict_Check(a[0]) || !PyDict_Check(a[1]) || !PyTuple_Check(a[2])) {
        PyErr_SetString(PyExc_TypeError, "call_hit(seen: dict, kwargs: dict, values: tuple)");
        return NULL;
    }
    PyObject *ids = make_ids(a[1], a[2]);
    if (ids == NULL || !calls_bound) return ids;
    PyObject *seen = PyDict_GetItemWithError(a[0], ids);
    if (seen == NULL) {
        if (PyErr_Occurred()) Py_CLEAR(ids);
        return ids;
    }
    if (Py_TYPE(seen) != seen_type) return ids;
    Py_INCREF(seen);   /* (the torch check runs Python, which may drop it from the dict) */
    PyObject *ready = NULL;
    int found = seen_ready(seen, a[2], &ready);
    Py_DECREF(seen);
    if (found < 0) {
        Py_DECREF(ids);
        return NULL;
    }
    if (found) {
        Py_DECREF(ids);
        return ready;
    }
    return ids;
}

/* torch_holds(ptrs, data_ptr, check, streams, cuda, public, raw, xs) -> True, False or
 * None: whether torch tensors xs still have the data pointers ptrs (data_ptr(x) each),
 * pass the guard's check(*xs) and find torch's current stream on each (index, handle) of
 * streams (raw(index), valid while cuda.current_stream is public). None: the Python
 * check must decide (no guard, the guard refused, or the stream getter changed). Why:
 * the same checks as tilelab.kernels._host.wrappers.TorchState.holds without its Python,
 * which was most of what a repeated call on torch tensors costs beyond one on tilelab
 * tensors. */
static PyObject *s_current_stream = NULL;

static PyObject *nl_torch_holds(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    if (n != 8 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[3]) || !PyTuple_Check(a[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "torch_holds(ptrs: tuple, data_ptr, check, streams: tuple, cuda, "
                        "public, raw, xs: tuple)");
        return NULL;
    }
    PyObject *ptrs = a[0], *data_ptr = a[1], *check = a[2], *streams = a[3];
    PyObject *xs = a[7];
    Py_ssize_t len = PyTuple_GET_SIZE(xs);
    if (PyTuple_GET_SIZE(ptrs) != len) Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *p = PyObject_CallOneArg(data_ptr, PyTuple_GET_ITEM(xs, i));
        if (p == NULL) return NULL;
        int same = PyObject_RichCompareBool(p, PyTuple_GET_ITEM(ptrs, i), Py_EQ);
        Py_DECREF(p);
        if (same < 0) return NULL;
        if (!same) Py_RETURN_FALSE;
    }
    if (check == Py_None) Py_RETURN_NONE;
    PyObject *r = PyObject_Vectorcall(check, len ? &PyTuple_GET_ITEM(xs, 0) : NULL,
                                      (size_t)len, NULL);
    if (r == NULL) return NULL;
    int passed = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (passed < 0) return NULL;
    if (!passed) Py_RETURN_NONE;
    Py_ssize_t ns = PyTuple_GET_SIZE(streams);
    if (ns == 0) Py_RETURN_TRUE;
    if (a[6] == Py_None) Py_RETURN_NONE;
    if (s_current_stream == NULL &&
        (s_current_stream = PyUnicode_InternFromString("current_stream")) == NULL)
        return NULL;
    PyObject *now = PyObject_GetAttr(a[4], s_current_stream);
    if (now == NULL) return NULL;
    Py_DECREF(now);
    if (now != a[5]) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *pair = PyTuple_GET_ITEM(streams, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) Py_RETURN_NONE;
        PyObject *h = PyObject_CallOneArg(a[6], PyTuple_GET_ITEM(pair, 0));
        if (h == NULL) return NULL;
        int same = PyObject_RichCompareBool(h, PyTuple_GET_ITEM(pair, 1), Py_EQ);
        Py_DECREF(h);
        if (same < 0) return NULL;
        if (!same) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"init", nl_init, METH_O, "init(libcuda_path): bind the driver entry points"},
    {"prepare", (PyCFunction)(void (*)(void))nl_prepare, METH_FASTCALL,
     "prepare(function, gx, gy, gz, stream, params) -> prepared launch"},
    {"launch", nl_launch, METH_O, "launch(prepared) -> CUresult"},
    {"launch_on", (PyCFunction)(void (*)(void))nl_launch_on, METH_FASTCALL,
     "launch_on(prepared, stream) -> CUresult"},
    {"sync", nl_sync, METH_O, "sync(stream) -> CUresult"},
    {"bind_hot", (PyCFunction)(void (*)(void))nl_bind_hot, METH_FASTCALL,
     "bind_hot(launch_type, record_type, future_type, info_type, FREE_EPOCH, "
     "SPECIAL_MODES, logs, push, appended, on_error, pin_type, pkg_dir)"},
    {"hot", (PyCFunction)(void (*)(void))nl_hot, METH_FASTCALL,
     "hot(prepared_launch, args) -> Future, or None (take the Python path)"},
    {"bind_match", nl_bind_match, METH_O,
     "bind_match(same_type): compare prepared scalars by identity in C"},
    {"call_key", (PyCFunction)(void (*)(void))nl_call_key, METH_FASTCALL,
     "call_key(kwnames, values, users, part, tensor_type) -> prepared-call key"},
    {"call_ids", (PyCFunction)(void (*)(void))nl_call_ids, METH_FASTCALL,
     "call_ids(kwargs, values) -> (*kwargs, *map(id, values))"},
    {"bind_calls", (PyCFunction)(void (*)(void))nl_bind_calls, METH_FASTCALL,
     "bind_calls(seen_type, entry_type, ready_type)"},
    {"call_hit", (PyCFunction)(void (*)(void))nl_call_hit, METH_FASTCALL,
     "call_hit(seen, kwargs, values) -> Ready, or the call's ids (Python decides)"},
    {"torch_holds", (PyCFunction)(void (*)(void))nl_torch_holds, METH_FASTCALL,
     "torch_holds(ptrs, data_ptr, check, streams, cuda, public, raw, xs) -> bool or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tilelab_native",
                                    "tilelab's native cuLaunchKernel call", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tilelab_native(void) { return PyModule_Create(&module); }
