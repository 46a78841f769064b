# property: infinite loop: CPU-time limit
# kind: stdio
while True:
    pass
