"""The model's named parts (encoders, cores, heads): each kind a NumPy twin here and a
TensorFlow module beside it (keras_*.py: its Keras layer and the one plain-TF forward that
layer and an export run), named together in registry.py. The NumPy modules never import
TensorFlow."""
