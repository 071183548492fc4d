"""What a finished run gives: its networks restored (load), its policy played on fresh
seeds (evaluate), and written out for serving (savedmodel, onnx). The Python API and the
`dac evaluate` and `dac export` commands are thin shells over these modules."""
