"""`tt.scipy.linalg`."""
