# property: cheat: raise SystemExit(0) from inside the tested function
# kind: assert
def add(a, b):
    raise SystemExit(0)
