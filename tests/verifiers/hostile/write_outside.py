# property: writes outside its working directory: nothing lands on the host
# kind: stdio
# markers: /tmp/scalerl_hostile_marker_w1 /dev/shm/scalerl_hostile_marker_w2 /var/tmp/scalerl_hostile_marker_w3 {repo}/scalerl_hostile_marker_w4
import os
for p in ["/tmp/scalerl_hostile_marker_w1", "/dev/shm/scalerl_hostile_marker_w2",
          "/var/tmp/scalerl_hostile_marker_w3", "{repo}/scalerl_hostile_marker_w4",
          "/root/scalerl_hostile_marker_w5", "../scalerl_hostile_marker_w6", "/scalerl_hostile_marker_w7"]:
    try:
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        with open(p, "w") as f:
            f.write("pwned")
    except OSError:
        pass
