"""`tt.scipy.signal`."""
