"""`dac bench`'s measurements: phases, their JSON records, tables and plots."""
