/*
 * aiokafka_lite._speedups: the compiled hot path of the record codec and murmur2.
 *
 * Optional: the pure-Python modules are the reference and run wherever this is not
 * built (AIOKAFKA_LITE_PURE=1 forces them). Each function here does what its Python
 * twin does, for the shapes it knows, and hands everything else to the Python code:
 *
 *   RecordWriterBase.append: protocol/records/encode.py RecordWriter.append, for int
 *     timestamps, bytes (or None) keys and values, and headers given as a list or tuple
 *     of (str, bytes or None) tuples; any other input, and every error (a bad
 *     timestamp, a record too large), goes to the Python method, which says what is
 *     wrong. Same bytes written, same results.
 *   decode_v2: protocol/records/decode.py _decode_v2 (the records of one v2 batch as
 *     ConsumerRecord objects, their slots filled directly), with the same checks;
 *     malformed input raises
 *     CorruptRecordError. Differential tests and the fuzz target compare the two.
 *   murmur2, murmur2_partition: producer/partitioner.py's, for bytes.
 *
 * The Python side tells it, once, what decode_v2 builds and raises (set_record_type) and
 * where the writer's general path is (set_writer_fallback).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static PyObject *ConsumerRecordType = NULL; /* a slotted class: its fields are below */
#define RECORD_FIELDS 12
static const char *record_fields[RECORD_FIELDS] = {
    "topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
    "checksum", "serialized_key_size", "serialized_value_size", "headers", "leader_epoch"};
static Py_ssize_t record_offsets[RECORD_FIELDS]; /* where each field's slot is */
static PyObject *CorruptRecordError = NULL;
static PyObject *python_append = NULL; /* RecordWriter.append, the general path */
static PyObject *empty_tuple = NULL;

/* --- varints ----------------------------------------------------------------------- */

static inline uint64_t zigzag64(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline Py_ssize_t varint_size(int64_t v) {
    uint64_t z = zigzag64(v);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *put_varint(unsigned char *p, int64_t v) {
    uint64_t z = zigzag64(v);
    while (z >= 0x80) {
        *p++ = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    *p++ = (unsigned char)z;
    return p;
}

/* --- the record writer ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *buf; /* bytearray of encoded records */
    Py_ssize_t max_size;
    Py_ssize_t record_count;
    long long base_ts;
    long long max_ts;
    char open;
    Py_ssize_t quick;
    Py_ssize_t record_limit;
    PyObject *limit_name;
} Writer;

static int writer_traverse(Writer *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    Py_VISIT(self->limit_name);
    return 0;
}

static int writer_clear(Writer *self) {
    Py_CLEAR(self->buf);
    Py_CLEAR(self->limit_name);
    return 0;
}

static void writer_dealloc(Writer *self) {
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int writer_init(Writer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"max_size", "record_limit", "limit_name", NULL};
    Py_ssize_t max_size;
    Py_ssize_t record_limit = ((Py_ssize_t)1 << 31) - 1 - 61;
    PyObject *limit_name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|nU", kwlist, &max_size, &record_limit,
                                     &limit_name))
        return -1;
    PyObject *buf = PyByteArray_FromStringAndSize(NULL, 0);
    if (buf == NULL)
        return -1;
    Py_XSETREF(self->buf, buf);
    if (limit_name == NULL) {
        limit_name = PyUnicode_FromString("the largest batch");
        if (limit_name == NULL)
            return -1;
    } else {
        Py_INCREF(limit_name);
    }
    Py_XSETREF(self->limit_name, limit_name);
    self->max_size = max_size;
    self->record_count = 0;
    self->base_ts = -1;
    self->max_ts = -1;
    self->open = 1;
    self->record_limit = record_limit;
    /* as RecordWriter.__init__: min(SMALL - 16, record_limit - MAX_RECORD_OVERHEAD) */
    Py_ssize_t quick = record_limit - 31;
    self->quick = quick < 16384 - 16 ? quick : 16384 - 16;
    return 0;
}

/* The general path: RecordWriter.append in Python. */
static PyObject *fall_back(Writer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (python_append == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_writer_fallback() was not called");
        return NULL;
    }
    PyObject *call[5] = {(PyObject *)self, args[0], args[1], args[2],
                         nargs > 3 ? args[3] : Py_None};
    return PyObject_Vectorcall(python_append, call, 5, NULL);
}

typedef struct {
    const char *key;
    Py_ssize_t klen;
    const char *value; /* NULL: null value */
    Py_ssize_t vlen;
} HeaderView;

#define MAX_FAST_HEADERS 16

/* Make the batch's bytearray `size` bytes long. bytearray's own growth adds an eighth at
 * a time, so a batch filled record by record was copied ~40 times on its way to 16 KiB;
 * here the allocation at least doubles, up to the batch's reservation (max_size), and
 * appends within it only move the end. The bytearray stays a plain one: the bytes past
 * its size are spare room, as after any bytearray resize. */
static int writer_extend(Writer *self, PyObject *buf, Py_ssize_t size) {
    PyByteArrayObject *ba = (PyByteArrayObject *)buf;
    if (ba->ob_exports > 0 || ba->ob_start != ba->ob_bytes)
        return PyByteArray_Resize(buf, size); /* (its own rules: BufferError...) */
    if (size >= ba->ob_alloc) {
        Py_ssize_t room = 2 * Py_SIZE(buf);
        if (room > self->max_size)
            room = self->max_size;
        if (room < 256)
            room = 256;
        if (room < size)
            room = size;
        if (PyByteArray_Resize(buf, room) < 0)
            return -1;
    }
    Py_SET_SIZE(buf, size);
    ba->ob_start[size] = '\0';
    return 0;
}

static PyObject *writer_append(Writer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "append(timestamp, key, value, headers=None)");
        return NULL;
    }
    PyObject *ts_obj = args[0], *key = args[1], *value = args[2];
    PyObject *headers = nargs > 3 ? args[3] : Py_None;
    if (!PyLong_CheckExact(ts_obj) || !PyByteArray_CheckExact(self->buf))
        return fall_back(self, args, nargs);
    int overflow = 0;
    long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
    if (overflow || ts < 0) {
        if (ts == -1 && PyErr_Occurred())
            return NULL;
        return fall_back(self, args, nargs); /* it says what is wrong */
    }
    if ((key != Py_None && !PyBytes_CheckExact(key)) ||
        (value != Py_None && !PyBytes_CheckExact(value)))
        return fall_back(self, args, nargs);

    Py_ssize_t n = self->record_count;
    int64_t ts_delta = n ? (int64_t)(ts - self->base_ts) : 0;

    /* headers: None, or a list/tuple of (str, bytes|None) tuples */
    HeaderView hv[MAX_FAST_HEADERS];
    Py_ssize_t nheaders = 0;
    Py_ssize_t headers_size = 1;
    if (headers != Py_None) {
        PyObject **items;
        if (PyList_CheckExact(headers)) {
            nheaders = PyList_GET_SIZE(headers);
            items = ((PyListObject *)headers)->ob_item;
        } else if (PyTuple_CheckExact(headers)) {
            nheaders = PyTuple_GET_SIZE(headers);
            items = ((PyTupleObject *)headers)->ob_item;
        } else {
            return fall_back(self, args, nargs);
        }
        if (nheaders > MAX_FAST_HEADERS)
            return fall_back(self, args, nargs);
        headers_size = varint_size(nheaders);
        for (Py_ssize_t i = 0; i < nheaders; i++) {
            PyObject *h = items[i];
            if (!PyTuple_CheckExact(h) || PyTuple_GET_SIZE(h) != 2)
                return fall_back(self, args, nargs);
            PyObject *hk = PyTuple_GET_ITEM(h, 0), *hval = PyTuple_GET_ITEM(h, 1);
            if (!PyUnicode_CheckExact(hk) || (hval != Py_None && !PyBytes_CheckExact(hval)))
                return fall_back(self, args, nargs);
            Py_ssize_t klen;
            const char *k = PyUnicode_AsUTF8AndSize(hk, &klen);
            if (k == NULL) {
                PyErr_Clear(); /* a lone surrogate: the Python path raises its own error */
                return fall_back(self, args, nargs);
            }
            hv[i].key = k;
            hv[i].klen = klen;
            headers_size += varint_size(klen) + klen;
            if (hval == Py_None) {
                hv[i].value = NULL;
                hv[i].vlen = -1;
                headers_size += 1;
            } else {
                hv[i].value = PyBytes_AS_STRING(hval);
                hv[i].vlen = PyBytes_GET_SIZE(hval);
                headers_size += varint_size(hv[i].vlen) + hv[i].vlen;
            }
        }
    }
    Py_ssize_t klen = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
    Py_ssize_t vlen = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
    Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size((int64_t)n);
    body += klen < 0 ? 1 : varint_size(klen) + klen;
    body += vlen < 0 ? 1 : varint_size(vlen) + vlen;
    body += headers_size;
    Py_ssize_t size = varint_size(body) + body;
    if (size > self->record_limit)
        return fall_back(self, args, nargs); /* RecordTooLargeError, named */

    PyObject *buf = self->buf;
    Py_ssize_t used = PyByteArray_GET_SIZE(buf);
    if (n && used + size > self->max_size) {
        self->open = 0;
        return PyLong_FromLong(0);
    }
    if (writer_extend(self, buf, used + size) < 0)
        return NULL;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(buf) + used;
    p = put_varint(p, body);
    *p++ = 0; /* attributes */
    p = put_varint(p, ts_delta);
    p = put_varint(p, (int64_t)n);
    if (klen < 0) {
        *p++ = 1;
    } else {
        p = put_varint(p, klen);
        memcpy(p, PyBytes_AS_STRING(key), klen);
        p += klen;
    }
    if (vlen < 0) {
        *p++ = 1;
    } else {
        p = put_varint(p, vlen);
        memcpy(p, PyBytes_AS_STRING(value), vlen);
        p += vlen;
    }
    p = put_varint(p, nheaders);
    for (Py_ssize_t i = 0; i < nheaders; i++) {
        p = put_varint(p, hv[i].klen);
        memcpy(p, hv[i].key, hv[i].klen);
        p += hv[i].klen;
        if (hv[i].value == NULL) {
            *p++ = 1;
        } else {
            p = put_varint(p, hv[i].vlen);
            memcpy(p, hv[i].value, hv[i].vlen);
            p += hv[i].vlen;
        }
    }
    if (!n) {
        self->base_ts = ts;
        self->max_ts = ts;
    } else if (ts > self->max_ts) {
        self->max_ts = ts;
    }
    self->record_count = n + 1;
    return PyLong_FromSsize_t(size);
}

static PyMethodDef writer_methods[] = {
    {"append", (PyCFunction)(void (*)(void))writer_append, METH_FASTCALL,
     "append(timestamp, key, value, headers=None) -> encoded size, or 0 if it does not fit"},
    {NULL}};

static PyMemberDef writer_members[] = {
    {"buf", T_OBJECT_EX, offsetof(Writer, buf), 0, "the encoded records"},
    {"max_size", T_PYSSIZET, offsetof(Writer, max_size), 0, NULL},
    {"record_count", T_PYSSIZET, offsetof(Writer, record_count), 0, NULL},
    {"base_ts", T_LONGLONG, offsetof(Writer, base_ts), 0, NULL},
    {"max_ts", T_LONGLONG, offsetof(Writer, max_ts), 0, NULL},
    {"open", T_BOOL, offsetof(Writer, open), 0, NULL},
    {"quick", T_PYSSIZET, offsetof(Writer, quick), 0, NULL},
    {"record_limit", T_PYSSIZET, offsetof(Writer, record_limit), 0, NULL},
    {"limit_name", T_OBJECT_EX, offsetof(Writer, limit_name), 0, NULL},
    {NULL}};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "aiokafka_lite._speedups.RecordWriterBase",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields and the append of protocol.records.RecordWriter, compiled.",
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_init = (initproc)writer_init,
    .tp_new = PyType_GenericNew,
    .tp_methods = writer_methods,
    .tp_members = writer_members,
};

/* --- decoding ---------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos;
    Py_ssize_t end;
} Cursor;

static int corrupt(const char *message) {
    PyErr_SetString(CorruptRecordError, message);
    return -1;
}

#define SHORT "record data ends in the middle of a record"

/* A zigzag varint of at most 64 bits; -1 with CorruptRecordError set on failure. */
static int read_varint(Cursor *c, int64_t *out) {
    uint64_t raw = 0;
    for (int shift = 0;; shift += 7) {
        if (shift > 63)
            return corrupt("varint longer than 10 bytes");
        if (c->pos >= c->end)
            return corrupt(SHORT);
        unsigned char b = c->p[c->pos++];
        if (shift == 63 && b > 1)
            return corrupt("varint longer than 64 bits");
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* base + delta as a Python int (a Python int past int64, as the Python decoder gives). */
static PyObject *add_int(int64_t base, int64_t delta) {
    int64_t sum;
    if (!__builtin_add_overflow(base, delta, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *a = PyLong_FromLongLong(base), *b = PyLong_FromLongLong(delta), *r = NULL;
    if (a && b)
        r = PyNumber_Add(a, b);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

/* Header names repeat from record to record ("trace-id", "content-type"): the last few
 * are kept, so a name seen before costs a comparison instead of a new str. So are many
 * values ("content-type": "application/json"): the last pair read under each kept name is
 * kept too, and a header equal to it is that same immutable tuple, not two new objects. */
#define NAME_CACHE 8
#define NAME_CACHE_MAX_LEN 64
#define PAIR_CACHE_MAX_LEN 64
static PyObject *name_cache[NAME_CACHE];
static PyObject *last_pair[NAME_CACHE]; /* (name_cache[i], value), or NULL */
static unsigned int name_cache_next = 0;

/* The name as a str; *slot is its place in the cache, or -1. */
static PyObject *header_name(const char *data, Py_ssize_t len, int *slot) {
    if (len <= NAME_CACHE_MAX_LEN) {
        for (int i = 0; i < NAME_CACHE; i++) {
            PyObject *name = name_cache[i];
            if (name != NULL && PyUnicode_GET_LENGTH(name) == len &&
                memcmp(PyUnicode_DATA(name), data, len) == 0) {
                *slot = i;
                return Py_NewRef(name);
            }
        }
    }
    *slot = -1;
    PyObject *name = PyUnicode_DecodeUTF8(data, len, NULL);
    /* only ASCII names are cached: their characters are their UTF-8 bytes */
    if (name != NULL && len <= NAME_CACHE_MAX_LEN && PyUnicode_IS_ASCII(name)) {
        int i = (int)(name_cache_next++ % NAME_CACHE);
        Py_XSETREF(name_cache[i], Py_NewRef(name));
        Py_CLEAR(last_pair[i]);
        *slot = i;
    }
    return name;
}

/* The pair kept under the name's slot when its value is these bytes (None: vlen -1). */
static PyObject *same_pair(int slot, const char *data, int64_t vlen) {
    if (slot < 0 || last_pair[slot] == NULL)
        return NULL;
    PyObject *value = PyTuple_GET_ITEM(last_pair[slot], 1);
    if (vlen == -1 ? value == Py_None
                   : (value != Py_None && PyBytes_GET_SIZE(value) == vlen &&
                      memcmp(PyBytes_AS_STRING(value), data, (size_t)vlen) == 0))
        return last_pair[slot];
    return NULL;
}

static PyObject *read_headers(Cursor *c, Py_ssize_t rec_end) {
    int64_t count;
    if (read_varint(c, &count) < 0)
        return NULL;
    /* each header takes at least 2 bytes; halving the room, not doubling the count,
     * which a corrupt count would overflow */
    if (count < 0 || count > (rec_end - c->pos) / 2) {
        PyErr_Format(CorruptRecordError, "bad header count %lld", (long long)count);
        return NULL;
    }
    PyObject *out = PyTuple_New((Py_ssize_t)count);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t klen, vlen;
        if (read_varint(c, &klen) < 0)
            goto fail;
        if (klen < 0 || klen > rec_end - c->pos) {
            PyErr_Format(CorruptRecordError, "bad header key length %lld", (long long)klen);
            goto fail;
        }
        int slot;
        PyObject *name = header_name((const char *)c->p + c->pos, klen, &slot);
        if (name == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                corrupt("header key is not UTF-8");
            }
            goto fail;
        }
        c->pos += klen;
        if (read_varint(c, &vlen) < 0) {
            Py_DECREF(name);
            goto fail;
        }
        if (vlen < -1 || vlen > rec_end - c->pos) {
            Py_DECREF(name);
            PyErr_Format(CorruptRecordError, "bad header value length %lld", (long long)vlen);
            goto fail;
        }
        const char *vdata = (const char *)c->p + c->pos;
        PyObject *pair = same_pair(slot, vdata, vlen);
        if (pair != NULL) {
            Py_DECREF(name);
            Py_INCREF(pair);
            c->pos += vlen > 0 ? vlen : 0;
            PyTuple_SET_ITEM(out, i, pair);
            continue;
        }
        PyObject *hvalue;
        if (vlen == -1) {
            hvalue = Py_NewRef(Py_None);
        } else {
            hvalue = PyBytes_FromStringAndSize(vdata, vlen);
            if (hvalue == NULL) {
                Py_DECREF(name);
                goto fail;
            }
            c->pos += vlen;
        }
        pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(name);
            Py_DECREF(hvalue);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, name);
        PyTuple_SET_ITEM(pair, 1, hvalue);
        /* Immutable and holding a str and bytes (or None): it can be in no cycle, which
         * is what CPython's collector finds out at its first pass and untracks it for. */
        PyObject_GC_UnTrack(pair);
        if (slot >= 0 && vlen <= PAIR_CACHE_MAX_LEN)
            Py_XSETREF(last_pair[slot], Py_NewRef(pair));
        PyTuple_SET_ITEM(out, i, pair);
    }
    PyObject_GC_UnTrack(out); /* (likewise: a tuple of such pairs) */
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* Sizes as ints: most keys and values are under a few KiB, and an int above 256 is a new
 * object each time. These are made once, all together when the module loads: side by
 * side in memory, so the sizes a run of records uses share a few cache lines (made one
 * at a time as first met, each sat among other objects: a cache miss per record). */
#define SIZE_INTS 4096
static PyObject *size_ints[SIZE_INTS];

static int make_size_ints(void) {
    for (Py_ssize_t n = 0; n < SIZE_INTS; n++)
        if ((size_ints[n] = PyLong_FromSsize_t(n)) == NULL)
            return -1;
    return 0;
}

static inline PyObject *size_int(int64_t n) {
    if (n < 0 || n >= SIZE_INTS)
        return PyLong_FromLongLong(n);
    return Py_NewRef(size_ints[n]);
}

/* Append the ``count`` records in buf[pos:end] to ``out`` (decode_v2's work); -1 with an
 * exception set when they are malformed (some records may have been appended). */
static int decode_into(PyObject *out, const unsigned char *data, Py_ssize_t pos,
                       Py_ssize_t end, Py_ssize_t count, long long base_offset, long long base_ts,
                       PyObject *log_append, PyObject *topic, PyObject *partition,
                       PyObject *ts_type, PyObject *epoch, long long min_offset) {
    if (count < 0 || count > (end - pos) / 7) { /* a record takes at least 7 bytes */
        PyErr_Format(CorruptRecordError, "record count %zd does not fit in %zd bytes", count,
                     end - pos);
        return -1;
    }
    PyTypeObject *rec_type = (PyTypeObject *)ConsumerRecordType;
    Cursor c = {data, pos, end};
    PyObject *last_ts = NULL;
    int64_t last_ts_delta = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, klen, vlen;
        Cursor whole = c;
        if (read_varint(&whole, &length) < 0)
            goto fail;
        Py_ssize_t rec_end = whole.pos + (Py_ssize_t)length;
        if (length < 6 || length > c.end - whole.pos) {
            PyErr_Format(CorruptRecordError, "bad record length %lld", (long long)length);
            goto fail;
        }
        /* inside the record: reading past its end is reading past the data */
        Cursor r = {whole.p, whole.pos + 1, rec_end}; /* skip the attributes byte */
        if (read_varint(&r, &ts_delta) < 0 || read_varint(&r, &offset_delta) < 0 ||
            read_varint(&r, &klen) < 0)
            goto fail;
        PyObject *key = NULL, *value = NULL, *headers = NULL;
        if (klen == -1) {
            key = Py_NewRef(Py_None);
        } else if (klen >= 0 && klen <= rec_end - r.pos) {
            key = PyBytes_FromStringAndSize((const char *)r.p + r.pos, klen);
            if (key == NULL)
                goto fail;
            r.pos += klen;
        } else {
            PyErr_Format(CorruptRecordError, "bad key length %lld", (long long)klen);
            goto fail;
        }
        if (read_varint(&r, &vlen) < 0) {
            Py_DECREF(key);
            goto fail;
        }
        if (vlen == -1) {
            value = Py_NewRef(Py_None);
        } else if (vlen >= 0 && vlen <= rec_end - r.pos) {
            value = PyBytes_FromStringAndSize((const char *)r.p + r.pos, vlen);
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            r.pos += vlen;
        } else {
            Py_DECREF(key);
            PyErr_Format(CorruptRecordError, "bad value length %lld", (long long)vlen);
            goto fail;
        }
        if (r.pos < rec_end && r.p[r.pos] == 0) {
            headers = Py_NewRef(empty_tuple);
            r.pos++;
        } else {
            headers = read_headers(&r, rec_end);
            if (headers == NULL) {
                Py_DECREF(key);
                Py_DECREF(value);
                goto fail;
            }
        }
        if (r.pos != rec_end) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            corrupt("record length does not match its fields");
            goto fail;
        }
        c.pos = rec_end;
        int64_t offset;
        int big_offset = __builtin_add_overflow((int64_t)base_offset, offset_delta, &offset);
        if (!big_offset && offset < min_offset) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            continue;
        }
        PyObject *offset_obj = add_int(base_offset, offset_delta);
        PyObject *ts_obj;
        if (log_append != Py_None) {
            ts_obj = Py_NewRef(log_append);
        } else if (last_ts != NULL && ts_delta == last_ts_delta) {
            ts_obj = Py_NewRef(last_ts); /* records of one millisecond share their int */
        } else {
            ts_obj = add_int(base_ts, ts_delta);
            if (ts_obj != NULL) {
                Py_XSETREF(last_ts, Py_NewRef(ts_obj));
                last_ts_delta = ts_delta;
            }
        }
        PyObject *ksize = size_int(klen);
        PyObject *vsize = size_int(vlen);
        PyObject *rec = rec_type->tp_alloc(rec_type, 0);
        if (!offset_obj || !ts_obj || !ksize || !vsize || !rec) {
            Py_XDECREF(offset_obj);
            Py_XDECREF(ts_obj);
            Py_XDECREF(ksize);
            Py_XDECREF(vsize);
            Py_XDECREF(rec);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto fail;
        }
        if (big_offset) {
            /* an offset past int64 (no broker sends one): compare as Python ints */
            PyObject *lo = PyLong_FromLongLong(min_offset);
            int below = lo ? PyObject_RichCompareBool(offset_obj, lo, Py_LT) : -1;
            Py_XDECREF(lo);
            if (below != 0) {
                Py_DECREF(offset_obj);
                Py_DECREF(ts_obj);
                Py_DECREF(ksize);
                Py_DECREF(vsize);
                Py_DECREF(rec);
                Py_DECREF(key);
                Py_DECREF(value);
                Py_DECREF(headers);
                if (below < 0)
                    goto fail;
                continue;
            }
        }
        PyObject *fields[RECORD_FIELDS] = {
            Py_NewRef(topic), Py_NewRef(partition), offset_obj,      ts_obj,
            Py_NewRef(ts_type), key,                value,           Py_NewRef(Py_None),
            ksize,             vsize,               headers,         Py_NewRef(epoch)};
        for (int f = 0; f < RECORD_FIELDS; f++) /* the slots are NULL: no reference lost */
            *(PyObject **)((char *)rec + record_offsets[f]) = fields[f];
        /* Every field is a str, bytes, int, None or an untracked tuple of such: the record
         * can be in no cycle until something else is stored in it, and record_setattr
         * tracks it again then (as CPython does with a dict of atomic values). */
        PyObject_GC_UnTrack(rec);
        int failed = PyList_Append(out, rec);
        Py_DECREF(rec);
        if (failed < 0)
            goto fail;
    }
    if (c.pos != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes left over after %zd records", end - c.pos,
                     count);
        goto fail;
    }
    Py_XDECREF(last_ts);
    return 0;
fail:
    Py_XDECREF(last_ts);
    return -1;
}

/* A read-only view of bytes: what it shows cannot change while it is read. */
static int is_view_of_bytes(PyObject *obj) {
    if (!PyMemoryView_Check(obj))
        return 0;
    PyObject *base = PyMemoryView_GET_BASE(obj);
    return PyMemoryView_GET_BUFFER(obj)->readonly && base != NULL && PyBytes_CheckExact(base) &&
           PyBuffer_IsContiguous(PyMemoryView_GET_BUFFER(obj), 'C');
}

/* What decode_v2 and decode_batches check first: their argument count, that
 * set_record_type() was called, and that the data (args[0]) is bytes (or, where views
 * are taken, a read-only view of bytes). */
static int check_decode_call(const char *name, PyObject *const *args, Py_ssize_t nargs,
                             Py_ssize_t want, int views) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
        return -1;
    }
    if (ConsumerRecordType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_record_type() was not called");
        return -1;
    }
    if (!PyBytes_CheckExact(args[0]) && !(views && is_view_of_bytes(args[0]))) {
        PyErr_Format(PyExc_TypeError,
                     views ? "%s needs bytes or a view of bytes" : "%s needs bytes", name);
        return -1;
    }
    return 0;
}

static PyObject *decode_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (check_decode_call("decode_v2", args, nargs, 12, 0) < 0)
        return NULL;
    PyObject *buf = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t count = PyLong_AsSsize_t(args[3]);
    long long base_offset = PyLong_AsLongLong(args[4]);
    long long base_ts = PyLong_AsLongLong(args[5]);
    PyObject *log_append = args[6];
    PyObject *topic = args[7], *partition = args[8], *ts_type = args[9], *epoch = args[10];
    long long min_offset = PyLong_AsLongLong(args[11]);
    if (PyErr_Occurred())
        return NULL;
    if (pos < 0 || end > PyBytes_GET_SIZE(buf) || pos > end) {
        PyErr_SetString(PyExc_ValueError, "bad buffer bounds");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    if (decode_into(out, (const unsigned char *)PyBytes_AS_STRING(buf), pos, end, count,
                    base_offset, base_ts, log_append, topic, partition, ts_type, epoch,
                    min_offset) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* --- runs of batches ----------------------------------------------------------------- */

static inline int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

#define LOG_OVERHEAD 12
#define V2_HEADER_SIZE 61
#define COMPRESSION_MASK 0x07
#define TIMESTAMP_TYPE_MASK 0x08
#define TRANSACTIONAL_MASK 0x10
#define CONTROL_MASK 0x20
#define MAX_CODEC 4

/* Whether the exception set is one the Python path raises again, with its own words, for
 * the batch a run stops at (a malformed batch, a failed decompression): cleared if so. */
static int leave_to_python(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception) && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* A view of raw memory inside a bytes object the caller keeps alive. */
static PyObject *view_of(const unsigned char *p, Py_ssize_t n) {
    return PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
}

/* decode_batches: see module_methods. The batches of a run are exactly those the Python
 * path (consumer/fetched.py) would decode with no further thought: magic 2, whole, CRC
 * right, no control batch, not transactional when asked, offsets in order and below the
 * high watermark, one leader epoch, a known codec, records well formed. The run stops
 * before any other batch, which the Python path then reads (and raises for, if it is
 * malformed): so errors keep their one source. */
static PyObject *decode_batches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* (a view: a fetch response's records, not copied out of its frame) */
    if (check_decode_call("decode_batches", args, nargs, 13, 1) < 0)
        return NULL;
    PyObject *buf = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    PyObject *topic = args[2], *partition = args[3];
    long long min_offset = PyLong_AsLongLong(args[4]);
    long long high_watermark = PyLong_AsLongLong(args[5]);
    long long batch_next = PyLong_AsLongLong(args[6]);
    int past_first = PyObject_IsTrue(args[7]);
    int check_crc = PyObject_IsTrue(args[8]);
    int stop_transactional = PyObject_IsTrue(args[9]);
    PyObject *crc_func = args[10], *decompress = args[11];
    Py_ssize_t limit = PyLong_AsSsize_t(args[12]);
    if (PyErr_Occurred() || past_first < 0 || check_crc < 0 || stop_transactional < 0)
        return NULL;
    Py_buffer whole; /* held while its memory is read (a released view refuses) */
    if (PyObject_GetBuffer(buf, &whole, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = whole.len;
    const unsigned char *data = (const unsigned char *)whole.buf;
    PyObject *out = NULL;
    if (pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "bad buffer position");
        goto fail;
    }
    out = PyList_New(0);
    if (out == NULL)
        goto fail;
    int32_t run_epoch = 0;
    int batches = 0;
    while (n - pos >= V2_HEADER_SIZE && PyList_GET_SIZE(out) < limit) {
        const unsigned char *h = data + pos;
        int32_t length = be32(h + 8);
        if (length < V2_HEADER_SIZE - LOG_OVERHEAD || length > n - pos - LOG_OVERHEAD)
            break; /* malformed, or cut off by the fetch size: the Python path says which */
        Py_ssize_t end = pos + LOG_OVERHEAD + length;
        if (h[16] != 2)
            break;
        int64_t base_offset = be64(h);
        int32_t epoch = be32(h + 12);
        uint32_t crc = (uint32_t)be32(h + 17);
        int attributes = (int16_t)((h[21] << 8) | h[22]);
        int32_t last_delta = be32(h + 23);
        int64_t base_ts = be64(h + 27);
        int64_t max_ts = be64(h + 35);
        int32_t count = be32(h + 57);
        int codec = attributes & COMPRESSION_MASK;
        int64_t last;
        if (attributes & CONTROL_MASK || codec > MAX_CODEC ||
            (stop_transactional && attributes & TRANSACTIONAL_MASK) ||
            (batches && epoch != run_epoch) ||
            __builtin_add_overflow(base_offset, (int64_t)last_delta, &last) ||
            last == INT64_MAX || (high_watermark >= 0 && last >= high_watermark) ||
            (past_first && base_offset < batch_next))
            break;
        if (check_crc) {
            PyObject *view = view_of(h + 21, end - pos - 21);
            if (view == NULL)
                goto fail;
            PyObject *got = PyObject_CallOneArg(crc_func, view);
            Py_DECREF(view);
            if (got == NULL)
                goto fail;
            unsigned long value = PyLong_AsUnsignedLong(got);
            Py_DECREF(got);
            if (value == (unsigned long)-1 && PyErr_Occurred())
                goto fail;
            if (value != crc)
                break;
        }
        PyObject *records = NULL; /* decompressed, or NULL: the records are in data */
        const unsigned char *rdata = data;
        Py_ssize_t start = pos + V2_HEADER_SIZE, stop = end;
        if (codec && !(count == 0 && start == stop)) {
            if (decompress == Py_None)
                break;
            PyObject *view = view_of(data + start, stop - start);
            if (view == NULL)
                goto fail;
            PyObject *codec_obj = PyLong_FromLong(codec);
            if (codec_obj == NULL) {
                Py_DECREF(view);
                goto fail;
            }
            PyObject *call_args[2] = {codec_obj, view};
            records = PyObject_Vectorcall(decompress, call_args, 2, NULL);
            Py_DECREF(codec_obj);
            Py_DECREF(view);
            if (records == NULL) {
                if (leave_to_python())
                    break;
                goto fail;
            }
            if (!PyBytes_CheckExact(records)) {
                Py_DECREF(records);
                break;
            }
            rdata = (const unsigned char *)PyBytes_AS_STRING(records);
            start = 0;
            stop = PyBytes_GET_SIZE(records);
        } /* else an empty compressed batch (compaction leaves them): nothing to decode */
        Py_ssize_t before = PyList_GET_SIZE(out);
        int decoded = -1;
        PyObject *log_append = NULL, *ts_type, *epoch_obj = PyLong_FromLong(epoch);
        int log_time = attributes & TIMESTAMP_TYPE_MASK;
        ts_type = log_time ? size_int(1) : size_int(0);
        if (log_time)
            log_append = PyLong_FromLongLong(max_ts);
        if (epoch_obj && ts_type && (!log_time || log_append))
            decoded = decode_into(out, rdata, start, stop, count, base_offset, base_ts,
                                  log_time ? log_append : Py_None, topic, partition, ts_type,
                                  epoch_obj, min_offset);
        Py_XDECREF(epoch_obj);
        Py_XDECREF(ts_type);
        Py_XDECREF(log_append);
        Py_XDECREF(records);
        if (decoded < 0) {
            /* malformed records: the Python path reads this batch and raises for it; the
             * run keeps only the batches before it */
            if (!leave_to_python() || PyList_SetSlice(out, before, PyList_GET_SIZE(out), NULL) < 0)
                goto fail;
            break;
        }
        pos = end;
        batch_next = last + 1;
        past_first = 1;
        run_epoch = epoch;
        batches++;
    }
    PyBuffer_Release(&whole);
    return Py_BuildValue("(NnLi)", out, pos, batch_next, (int)run_epoch);
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&whole);
    return NULL;
}

/* --- murmur2 ------------------------------------------------------------------------ */

static uint32_t murmur2_hash(const unsigned char *data, Py_ssize_t len) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28c ^ (uint32_t)len;
    Py_ssize_t words = len >> 2;
    for (Py_ssize_t i = 0; i < words; i++) {
        const unsigned char *q = data + 4 * i;
        uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) |
                     ((uint32_t)q[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * words;
    switch (len & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *murmur2(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = murmur2_hash(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)(int32_t)h);
}

/* The partition of a key's hash among count: Kafka's (murmur2(key) & 0x7fffffff) % count. */
static inline Py_ssize_t murmur2_index(uint32_t h, Py_ssize_t count) {
    return (Py_ssize_t)((h & 0x7fffffffu) % (uint64_t)count);
}

/* murmur2_partition(key, count): murmur2_index in one call, for the producer's keyed
 * records. */
static PyObject *murmur2_partition(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "murmur2_partition(key, num_partitions)");
        return NULL;
    }
    Py_ssize_t count = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count <= 0) {
        PyErr_SetString(count ? PyExc_ValueError : PyExc_ZeroDivisionError,
                        "num_partitions must be > 0");
        return NULL;
    }
    uint32_t h;
    if (PyBytes_CheckExact(args[0])) {
        h = murmur2_hash((const unsigned char *)PyBytes_AS_STRING(args[0]),
                         PyBytes_GET_SIZE(args[0]));
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        h = murmur2_hash(view.buf, view.len);
        PyBuffer_Release(&view);
    }
    return PyLong_FromSsize_t(murmur2_index(h, count));
}

/* --- the producer's append to a partition's open batch ---------------------------------
 * Producer.send()'s common case in one call: bytes key and value, the partition given,
 * placed by murmur2 (keyed) or the sticky partitioner's current one (keyless, while it
 * stays), the partition's open batch taking the record. Anything else returns
 * None and send() goes its general (Python) way, which also raises every error. */

static PyTypeObject *BatchType = NULL, *FutureType = NULL, *TopicInfoType = NULL;
static Py_ssize_t batch_timestamps = -1, future_batch = -1, future_index = -1;
static Py_ssize_t info_all = -1, info_open = -1;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

static Py_ssize_t slot_offset(PyTypeObject *type, const char *name) {
    for (PyTypeObject *t = type; t != NULL; t = t->tp_base) {
        for (PyMemberDef *m = t->tp_members; m != NULL && m->name != NULL; m++) {
            if (strcmp(m->name, name) == 0 && m->type == T_OBJECT_EX)
                return m->offset;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s has no slot %s", type->tp_name, name);
    return -1;
}

static PyObject *set_producer_types(PyObject *module, PyObject *args) {
    PyTypeObject *batch, *future, *info;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &batch, &PyType_Type, &future,
                          &PyType_Type, &info))
        return NULL;
    if (!PyType_IsSubtype(batch, &WriterType)) {
        PyErr_SetString(PyExc_TypeError, "the batch type is not a RecordWriterBase");
        return NULL;
    }
    if ((batch_timestamps = slot_offset(batch, "timestamps")) < 0 ||
        (future_batch = slot_offset(future, "_batch")) < 0 ||
        (future_index = slot_offset(future, "_index")) < 0 ||
        (info_all = slot_offset(info, "all")) < 0 || (info_open = slot_offset(info, "open")) < 0)
        return NULL;
    Py_XSETREF(BatchType, (PyTypeObject *)Py_NewRef(batch));
    Py_XSETREF(FutureType, (PyTypeObject *)Py_NewRef(future));
    Py_XSETREF(TopicInfoType, (PyTypeObject *)Py_NewRef(info));
    Py_RETURN_NONE;
}

/* The sticky partitioner's current choice for a keyless record, as its partition() makes
 * it: its partition while that has taken less than `limit` bytes, or less than twice that
 * while the partition's batch has room for another record of its average size (as the
 * accumulator's tail_batch_full says; `tail_limit` is the accumulator's batch size).
 * state is the partitioner's [partition, bytes] of the topic. NULL: not this way. */
static PyObject *sticky_choice(PyObject *state, PyObject *all, PyObject *opens,
                               long long limit, long long tail_limit, long long *produced) {
    if (state == NULL || !PyList_CheckExact(state) || PyList_GET_SIZE(state) != 2)
        return NULL;
    PyObject *part = PyList_GET_ITEM(state, 0), *bytes = PyList_GET_ITEM(state, 1);
    if (!PyLong_CheckExact(part) || !PyLong_CheckExact(bytes))
        return NULL;
    int overflow = 0;
    Py_ssize_t index = PyLong_AsSsize_t(part);
    long long done = PyLong_AsLongLongAndOverflow(bytes, &overflow);
    if (PyErr_Occurred() || overflow) {
        PyErr_Clear();
        return NULL;
    }
    if (index < 0 || index >= PyList_GET_SIZE(all))
        return NULL;
    if (done >= limit) {
        if (done >= 2 * limit || index >= PyList_GET_SIZE(opens))
            return NULL;
        PyObject *batch = PyList_GET_ITEM(opens, index);
        if (Py_TYPE(batch) != BatchType || !((Writer *)batch)->open)
            return NULL; /* (the open batch is the partition's last one) */
        Writer *w = (Writer *)batch;
        if (w->record_count) {
            Py_ssize_t used = PyByteArray_Check(w->buf) ? PyByteArray_GET_SIZE(w->buf) : -1;
            long long room = w->max_size > tail_limit ? w->max_size : tail_limit;
            if (used < 0 || used + used / w->record_count > room)
                return NULL;
        }
    }
    *produced = done;
    return part;
}

/* append_open(topics, topic, value, key, partition, timestamp_ms, headers, murmur_keys,
 *             sticky, grow) -> the record's future, or None. sticky: None, or the sticky
 * partitioner's (choices, batch_size) and the accumulator's batch size. grow: None, or
 * the accumulator's grow(batch) -> bool, asked when the batch is full at its reservation
 * (a batch reserves a small first share and doubles it as it fills: without it, each
 * doubling took send()'s whole Python path). */
static PyObject *append_open(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "append_open() takes 10 arguments");
        return NULL;
    }
    if (FutureType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_producer_types() was not called");
        return NULL;
    }
    PyObject *topics = args[0], *value = args[2], *key = args[3], *partition = args[4];
    PyObject *ts_obj = args[5], *headers = args[6];
    if (!PyBytes_CheckExact(value) || (key != Py_None && !PyBytes_CheckExact(key)) ||
        (headers != Py_None && !PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)) ||
        !PyDict_CheckExact(topics))
        Py_RETURN_NONE;
    PyObject *info = PyDict_GetItemWithError(topics, args[1]);
    if (info == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (Py_TYPE(info) != TopicInfoType)
        Py_RETURN_NONE;
    PyObject *opens = SLOT(info, info_open);
    if (opens == NULL || !PyList_CheckExact(opens))
        Py_RETURN_NONE;
    PyObject *chosen = partition, *sticky_state = NULL;
    long long produced = 0;
    if (partition == Py_None) {
        PyObject *all = SLOT(info, info_all);
        if (all == NULL || !PyList_CheckExact(all) || PyList_GET_SIZE(all) == 0)
            Py_RETURN_NONE;
        if (key != Py_None) {
            if (args[7] != Py_True)
                Py_RETURN_NONE;
            uint32_t h = murmur2_hash((const unsigned char *)PyBytes_AS_STRING(key),
                                      PyBytes_GET_SIZE(key));
            chosen = PyList_GET_ITEM(all, murmur2_index(h, PyList_GET_SIZE(all)));
        } else {
            PyObject *sticky = args[8];
            if (!PyTuple_CheckExact(sticky) || PyTuple_GET_SIZE(sticky) != 3 ||
                !PyDict_CheckExact(PyTuple_GET_ITEM(sticky, 0)))
                Py_RETURN_NONE;
            long long limit = PyLong_AsLongLong(PyTuple_GET_ITEM(sticky, 1));
            long long tail_limit = PyLong_AsLongLong(PyTuple_GET_ITEM(sticky, 2));
            if (PyErr_Occurred()) {
                PyErr_Clear();
                Py_RETURN_NONE;
            }
            sticky_state = PyDict_GetItemWithError(PyTuple_GET_ITEM(sticky, 0), args[1]);
            if (sticky_state == NULL && PyErr_Occurred())
                return NULL;
            chosen = sticky_choice(sticky_state, all, opens, limit, tail_limit, &produced);
            if (chosen == NULL)
                Py_RETURN_NONE;
        }
    }
    if (!PyLong_CheckExact(chosen))
        Py_RETURN_NONE;
    Py_ssize_t p = PyLong_AsSsize_t(chosen);
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (p < 0 || p >= PyList_GET_SIZE(opens))
        Py_RETURN_NONE;
    PyObject *batch = PyList_GET_ITEM(opens, p);
    if (Py_TYPE(batch) != BatchType || !((Writer *)batch)->open)
        Py_RETURN_NONE;
    PyObject *timestamps = SLOT(batch, batch_timestamps);
    if (timestamps == NULL || !PyList_CheckExact(timestamps))
        Py_RETURN_NONE;
    PyObject *now = NULL;
    if (ts_obj == Py_None) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
            Py_RETURN_NONE;
        now = PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        if (now == NULL)
            return NULL;
        ts_obj = now;
    } else {
        int overflow = 0;
        long long given = PyLong_CheckExact(ts_obj) ? PyLong_AsLongLongAndOverflow(ts_obj, &overflow)
                                                    : -1;
        if (given < 0 || overflow) {
            PyErr_Clear();
            Py_RETURN_NONE; /* (send() says what is wrong) */
        }
    }
    /* The append may run Python (the writer's fallback for odd shapes): hold what is
     * used after it. */
    Py_INCREF(batch);
    Py_XINCREF(sticky_state);
    PyObject *result = NULL;
    Py_ssize_t n = ((Writer *)batch)->record_count;
    PyObject *call[4] = {ts_obj, key, value, headers};
    PyObject *grow = args[9];
    int appended;
    for (;;) {
        PyObject *size = writer_append((Writer *)batch, call, 4);
        if (size == NULL)
            goto done;
        appended = PyObject_IsTrue(size);
        Py_DECREF(size);
        if (appended != 0 || grow == Py_None)
            break;
        /* full at its reservation: the accumulator lets it grow, or it is full */
        PyObject *grown = PyObject_CallOneArg(grow, batch);
        if (grown == NULL)
            goto done;
        int more = PyObject_IsTrue(grown);
        Py_DECREF(grown);
        if (more < 0)
            goto done;
        if (!more)
            break;
    }
    if (appended < 0)
        goto done;
    if (!appended) {
        result = Py_NewRef(Py_None); /* full: send() opens the next batch */
        goto done;
    }
    timestamps = SLOT(batch, batch_timestamps); /* (read again after the append) */
    if (timestamps == NULL || !PyList_CheckExact(timestamps)) {
        PyErr_SetString(PyExc_RuntimeError, "a producer batch without its timestamps list");
        goto done;
    }
    if (PyList_Append(timestamps, ts_obj) < 0)
        goto done;
    if (sticky_state != NULL && PyList_GET_SIZE(sticky_state) == 2) {
        /* as StickyPartitioner.on_append(topic, partition, len(value) + 8) */
        PyObject *total = PyLong_FromLongLong(produced + PyBytes_GET_SIZE(value) + 8);
        if (total == NULL)
            goto done;
        Py_SETREF(((PyListObject *)sticky_state)->ob_item[1], total);
    }
    PyObject *index = PyLong_FromSsize_t(n);
    if (index == NULL)
        goto done;
    result = FutureType->tp_alloc(FutureType, 0);
    if (result == NULL) {
        Py_DECREF(index);
        goto done;
    }
    SLOT(result, future_batch) = Py_NewRef(batch);
    SLOT(result, future_index) = index;
done:
    Py_XDECREF(now);
    Py_XDECREF(sticky_state);
    Py_DECREF(batch);
    return result;
}

/* --- records the collector need not walk --------------------------------------------
 * decode_v2 leaves its records untracked by the cyclic collector: walking hundreds of
 * thousands of records that cannot be in a cycle was a third of the consumer's CPU. One
 * becomes trackable again as soon as anything that could lead back to it is stored in it:
 * an attribute set to a container or an object (a deserialized dict, a framework's
 * attribute), or its __dict__ handed out (see structs.py). */

/* What CPython's dicts test to decide whether holding a value makes them trackable. */
static int may_be_tracked(PyObject *value) {
    return PyObject_IS_GC(value) && (!PyTuple_CheckExact(value) || PyObject_GC_IsTracked(value));
}

/* The record type's __setattr__ (a method, so object.__setattr__ still applies to it). */
static PyObject *record_setattr(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "__setattr__(name, value)");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(self) && may_be_tracked(args[1]))
        PyObject_GC_Track(self);
    if (PyObject_GenericSetAttr(self, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef record_setattr_def = {
    "__setattr__", (PyCFunction)(void (*)(void))record_setattr, METH_FASTCALL,
    "Set an attribute; a record that may now be in a cycle is tracked again."};

static PyObject *track(PyObject *module, PyObject *obj) {
    if (PyObject_IS_GC(obj) && !PyObject_GC_IsTracked(obj))
        PyObject_GC_Track(obj);
    Py_RETURN_NONE;
}

/* --- frames ------------------------------------------------------------------------
 * A response larger than the connection's read buffer (a fetch: megabytes) is read in
 * place into the bytes object it ends up as: allocated uninitialized (the kernel commits
 * its pages as data arrives, so memory still grows with the bytes received, whatever size
 * the peer claimed), written through a view of its memory while nothing else holds it,
 * then handed over. Without it the frame was zero-filled parts joined into a new bytes:
 * two more passes over every byte and fresh pages for each. */

/* Frames are reused. A fetch response is megabytes; allocated afresh each time, every
 * page of it was faulted in, zeroed and charged on arrival and unmapped when it died: on
 * a consumer of service-sized records, about a fifth of its CPU time. So the frames handed
 * out are remembered, and one whose only reference left is this pool's (nothing else can
 * see it) is handed out again for a frame that fits, its size set to the new frame's, as
 * _PyBytes_Resize does to a bytes object nobody else holds. A frame is reused only for one
 * at least half its size, so a small frame never pins a large allocation. At most
 * FRAME_POOL frames and FRAME_POOL_BYTES of them are kept; drop_frames() lets them go. */

#define FRAME_POOL 4
#define FRAME_POOL_BYTES ((Py_ssize_t)32 << 20)
static PyObject *frame_pool[FRAME_POOL]; /* bytes objects, or NULL */
static Py_ssize_t frame_capacity[FRAME_POOL]; /* the size each was allocated with */

static void resize_unshared_bytes(PyObject *frame, Py_ssize_t size) {
    Py_SET_SIZE(frame, size);
    PyBytes_AS_STRING(frame)[size] = '\0';
    _Py_COMP_DIAG_PUSH
    _Py_COMP_DIAG_IGNORE_DEPR_DECLS
    ((PyBytesObject *)frame)->ob_shash = -1; /* no cached hash of the old contents */
    _Py_COMP_DIAG_POP
}

static PyObject *new_frame(PyObject *module, PyObject *arg) {
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "a frame has a positive size");
        return NULL;
    }
    int best = -1, slot = -1; /* the idle frame that fits best; a place for a new one */
    Py_ssize_t pooled = 0;
    for (int i = 0; i < FRAME_POOL; i++) {
        PyObject *f = frame_pool[i];
        if (f == NULL) {
            slot = i;
            continue;
        }
        pooled += frame_capacity[i];
        if (Py_REFCNT(f) != 1)
            continue; /* in use */
        Py_ssize_t capacity = frame_capacity[i];
        if (capacity >= size && capacity / 2 <= size) {
            if (best < 0 || capacity < frame_capacity[best])
                best = i;
        } else if (slot < 0 || frame_pool[slot] != NULL) {
            slot = i; /* idle and the wrong size: the new frame may take its place */
        }
    }
    if (best >= 0) {
        PyObject *f = frame_pool[best];
        resize_unshared_bytes(f, size);
        return Py_NewRef(f);
    }
    PyObject *frame = PyBytes_FromStringAndSize(NULL, size);
    if (frame == NULL)
        return NULL;
    if (slot >= 0) {
        PyObject *old = frame_pool[slot];
        if (pooled - (old ? frame_capacity[slot] : 0) + size <= FRAME_POOL_BYTES) {
            frame_pool[slot] = Py_NewRef(frame);
            frame_capacity[slot] = size;
            Py_XDECREF(old);
        }
    }
    return frame;
}

static PyObject *drop_frames(PyObject *module, PyObject *unused) {
    for (int i = 0; i < FRAME_POOL; i++)
        Py_CLEAR(frame_pool[i]);
    Py_RETURN_NONE;
}

static PyObject *frame_view(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "frame_view(frame: bytes, start: int)");
        return NULL;
    }
    PyObject *frame = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0 || start > PyBytes_GET_SIZE(frame)) {
        PyErr_SetString(PyExc_ValueError, "start outside the frame");
        return NULL;
    }
    return PyMemoryView_FromMemory(PyBytes_AS_STRING(frame) + start,
                                   PyBytes_GET_SIZE(frame) - start, PyBUF_WRITE);
}

/* --- the module --------------------------------------------------------------------- */

static PyObject *set_record_type(PyObject *module, PyObject *args) {
    PyObject *record_type, *error;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &record_type, &error))
        return NULL;
    /* The record type's fields must be object slots: find each one's offset. */
    PyMemberDef *members = ((PyTypeObject *)record_type)->tp_members;
    for (int i = 0; i < RECORD_FIELDS; i++) {
        record_offsets[i] = -1;
        for (PyMemberDef *m = members; m != NULL && m->name != NULL; m++) {
            if (strcmp(m->name, record_fields[i]) == 0 && m->type == T_OBJECT_EX)
                record_offsets[i] = m->offset;
        }
        if (record_offsets[i] < 0) {
            PyErr_Format(PyExc_TypeError, "the record type has no slot %s", record_fields[i]);
            return NULL;
        }
    }
    PyTypeObject *type = (PyTypeObject *)record_type;
    if (!(type->tp_flags & Py_TPFLAGS_HAVE_GC)) {
        PyErr_SetString(PyExc_TypeError, "the record type is not a collected type");
        return NULL;
    }
    if (type->tp_setattro != PyObject_GenericSetAttr) {
        PyErr_SetString(PyExc_TypeError, "the record type has its own __setattr__");
        return NULL;
    }
    PyObject *setattr = PyDescr_NewMethod(type, &record_setattr_def);
    if (setattr == NULL || PyObject_SetAttrString(record_type, "__setattr__", setattr) < 0) {
        Py_XDECREF(setattr);
        return NULL;
    }
    Py_DECREF(setattr);
    Py_XSETREF(ConsumerRecordType, Py_NewRef(record_type));
    Py_XSETREF(CorruptRecordError, Py_NewRef(error));
    Py_RETURN_NONE;
}

static PyObject *set_writer_fallback(PyObject *module, PyObject *append) {
    Py_XSETREF(python_append, Py_NewRef(append));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_producer_types", set_producer_types, METH_VARARGS,
     "set_producer_types(ProducerBatch, RecordFuture, _TopicInfo): what append_open reads and "
     "makes"},
    {"append_open", (PyCFunction)(void (*)(void))append_open, METH_FASTCALL,
     "append_open(topics, topic, value, key, partition, timestamp_ms, headers, murmur_keys, "
     "sticky) -> the record's future, or None where send() must go its general way"},
    {"set_record_type", set_record_type, METH_VARARGS,
     "set_record_type(ConsumerRecord, CorruptRecordError): what decode_v2 builds (a class "
     "with a slot per field) and raises"},
    {"set_writer_fallback", set_writer_fallback, METH_O,
     "set_writer_fallback(append): the Python RecordWriter.append, for the general path"},
    {"decode_v2", (PyCFunction)(void (*)(void))decode_v2, METH_FASTCALL,
     "decode_v2(buf, pos, end, count, base_offset, base_ts, log_append_time, topic, "
     "partition, timestamp_type, leader_epoch, min_offset) -> list of ConsumerRecord"},
    {"decode_batches", (PyCFunction)(void (*)(void))decode_batches, METH_FASTCALL,
     "decode_batches(buf, pos, topic, partition, min_offset, high_watermark, batch_next, "
     "past_first, check_crc, stop_transactional, crc32c, decompress, limit) -> (records, pos, "
     "batch_next, leader_epoch): the records of the plain v2 batches from pos on, as many as "
     "follow one another (until limit records); decompress(codec, view) -> bytes, or None to "
     "stop at compressed batches. pos unchanged: the batch there is the Python path's"},
    {"track", track, METH_O,
     "track(obj): let the cyclic collector see obj again (a record decode_v2 built)"},
    {"new_frame", new_frame, METH_O,
     "new_frame(size) -> an uninitialized bytes object of that size (perhaps one handed out "
     "before that nothing holds any more), to be filled through frame_view before anything "
     "else sees it"},
    {"drop_frames", drop_frames, METH_NOARGS,
     "drop_frames(): forget the frames kept for reuse (each is freed once nothing holds it)"},
    {"frame_view", (PyCFunction)(void (*)(void))frame_view, METH_FASTCALL,
     "frame_view(frame, start) -> a writable view of frame[start:] (it does not keep the "
     "frame alive: the caller does)"},
    {"murmur2", murmur2, METH_O, "murmur2(data) -> signed 32-bit hash, as Kafka's Java client"},
    {"murmur2_partition", (PyCFunction)(void (*)(void))murmur2_partition, METH_FASTCALL,
     "murmur2_partition(key, num_partitions) -> (murmur2(key) & 0x7fffffff) % num_partitions"},
    {NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "aiokafka_lite._speedups",
    "The compiled hot path of the record codec and of murmur2 (optional).", -1,
    module_methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    if (PyType_Ready(&WriterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL || make_size_ints() < 0 ||
        PyModule_AddObjectRef(m, "RecordWriterBase", (PyObject *)&WriterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
