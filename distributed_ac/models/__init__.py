"""The model's named parts (encoders, heads): each a NumPy twin here and a Keras
builder beside it (keras_*.py). The NumPy modules never import TensorFlow."""
