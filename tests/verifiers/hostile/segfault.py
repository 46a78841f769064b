# property: segfaults
# kind: stdio
import ctypes
ctypes.string_at(0)
