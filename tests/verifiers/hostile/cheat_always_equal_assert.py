# property: cheat: an object whose __eq__ is always True, in asserts
# kind: assert
class Eq:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
def add(a, b):
    return Eq()
