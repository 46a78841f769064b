# property: memory bomb: address-space limit stops a single process
# kind: stdio
blocks = []
while True:
    blocks.append(bytearray(50 * 1024 * 1024))
