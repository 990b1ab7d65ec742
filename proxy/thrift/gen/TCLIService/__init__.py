__all__ = ['ttypes', 'constants', 'TCLIService']
