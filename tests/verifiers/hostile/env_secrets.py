# property: reads environment secrets: the environment is scrubbed
# kind: stdio
import os
print(dict(os.environ))
try:
    import ctypes
    print(ctypes.string_at(ctypes.c_void_p.in_dll(ctypes.CDLL(None), "environ").value, 4096))
except Exception as e:
    print(e)
