"""`tt.scipy.integrate` (odeint: to come)."""
