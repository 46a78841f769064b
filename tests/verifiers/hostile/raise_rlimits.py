# property: tries to raise its rlimits, then spins: limits hold
# kind: stdio
import resource
for r in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE):
    try:
        resource.setrlimit(r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print("LEAK raised", r)
    except (ValueError, OSError):
        pass
while True:
    pass
